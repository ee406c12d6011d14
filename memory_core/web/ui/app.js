// The memory inspector: views over the memory-core JSON API. Every memory text is untrusted data and is
// set with textContent (through h() and text()), never as markup.
import { breakdownChart, retentionChart, scales } from "./charts.js";

const API = document.querySelector('meta[name="memory-core-api"]').content;
const CREDENTIAL_KEY = "memory-core.credential";
const SCOPE_KEY = "memory-core.scope";
const PAGE_SIZE = 50;
const CURVE_COUNT = 8;
const CURVE_DAYS = 180;
const JAPANESE = /[\u3040-\u30ff\u3400-\u9fff\uff66-\uff9f]/;
const $ = (id) => document.getElementById(id);

/** Create an element; attributes by name (``on*`` are listeners), children as text or nodes. */
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

/** An element holding ``value`` as text, marked Japanese when it is (for the right glyphs). */
function text(tag, value, attrs = {}) {
  const node = h(tag, attrs);
  node.textContent = value ?? "";
  if (JAPANESE.test(node.textContent)) node.lang = "ja";
  return node;
}

const fixed = (x, digits = 2) => (x === null || x === undefined ? "" : Number(x).toFixed(digits));
const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) + " UTC" : "");
const count = (n, one, many) => `${n.toLocaleString("en")} ${n === 1 ? one : many}`;

// -- state: the selected scope (also in the address, so a view can be linked) ---------------------------
const state = { user: null, agent: null, usersCursor: null, offset: 0, memory: null, entity: null };

function readScope(params) {
  const saved = JSON.parse(sessionStorage.getItem(SCOPE_KEY) || "{}");
  state.user = params.get("user") || saved.user || null;
  state.agent = params.get("agent") || saved.agent || null;
  sessionStorage.setItem(SCOPE_KEY, JSON.stringify({ user: state.user, agent: state.agent }));
  $("scope").textContent = state.user
    ? `User ${state.user}${state.agent ? ` · agent ${state.agent}` : " · no agent selected"}`
    : "No user selected";
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    link.href = `#/${link.dataset.view}${scopeQuery()}`;
  }
}

function scopeQuery() {
  const params = new URLSearchParams();
  if (state.user) params.set("user", state.user);
  if (state.agent) params.set("agent", state.agent);
  const query = params.toString();
  return query ? `?${query}` : "";
}

function needScope() {
  if (state.user && state.agent) return true;
  status("Pick a user and one of its agents in Scopes first.", "warn");
  return false;
}

function status(message, kind = "info") {
  const node = $("status");
  node.textContent = message;
  node.className = `status ${kind}`;
}

// -- the API, with the credential it needs ---------------------------------------------------------------
class ApiError extends Error {
  constructor(statusCode, error) {
    super(error?.message || `HTTP ${statusCode}`);
    this.status = statusCode;
    this.code = error?.code || "http_error";
  }
}

function credential() {
  try {
    return JSON.parse(sessionStorage.getItem(CREDENTIAL_KEY) || "null");
  } catch {
    return null;
  }
}

function askCredential() {
  const dialog = $("credential");
  const form = $("credential-form");
  return new Promise((resolve) => {
    const done = (saved) => {
      form.removeEventListener("submit", onSubmit);
      $("credential-cancel").removeEventListener("click", onCancel);
      dialog.removeEventListener("cancel", onCancel);
      if (dialog.open) dialog.close();
      resolve(saved);
    };
    const onSubmit = (event) => {
      event.preventDefault();
      const secret = form.elements.secret.value.trim();
      if (!secret) return;
      sessionStorage.setItem(CREDENTIAL_KEY, JSON.stringify({ kind: form.elements.kind.value, secret }));
      form.reset();
      $("forget-credential").hidden = false;
      done(true);
    };
    const onCancel = () => done(false);
    form.addEventListener("submit", onSubmit);
    $("credential-cancel").addEventListener("click", onCancel);
    dialog.addEventListener("cancel", onCancel); // Escape
    dialog.showModal();
    form.elements.secret.focus();
  });
}

// A token or key never travels in clear text to another machine (the remote client's rule too): over
// plain http the page sends one only to this machine (127.0.0.0/8, ::1, localhost).
function isLoopbackHost(host) {
  const name = host.replace(/^\[|\]$/g, "").toLowerCase();
  return name === "localhost" || name === "::1" || /^127(\.\d{1,3}){3}$/.test(name);
}
const CLEAR_TEXT_REMOTE = window.location.protocol === "http:" && !isLoopbackHost(window.location.hostname);
const CLEAR_TEXT_REFUSED = {
  code: "insecure_transport",
  message: "refusing to send a credential over plain http to another machine: serve it over https, or open "
    + "the page on the machine that runs memory-core (http://127.0.0.1)",
};

async function api(method, path, { query = {}, body, raw = false } = {}) {
  const url = new URL(API + path, window.location.origin);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const saved = CLEAR_TEXT_REMOTE ? null : credential();
    if (saved?.kind === "bearer") headers.Authorization = `Bearer ${saved.secret}`;
    if (saved?.kind === "functions-key") headers["x-functions-key"] = saved.secret;
    const response = await fetch(url, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin", cache: "no-store", redirect: "error",
    });
    if (response.status === 401) {
      if (CLEAR_TEXT_REMOTE) throw new ApiError(401, CLEAR_TEXT_REFUSED);
      sessionStorage.removeItem(CREDENTIAL_KEY);
      if (await askCredential()) continue;
      throw new ApiError(401, { code: "unauthorized", message: "no credential given" });
    }
    const data = await response.text();
    let parsed = null;
    try {
      parsed = data ? JSON.parse(data) : null;
    } catch {
      throw new ApiError(response.status, { message: `the answer is not JSON (HTTP ${response.status})` });
    }
    if (!response.ok) throw new ApiError(response.status, parsed?.error);
    return raw ? { data, parsed } : parsed;
  }
  throw new ApiError(401, { code: "unauthorized", message: "the credential was refused" });
}

function failed(error) {
  status(error instanceof ApiError ? `${error.message} (${error.status} ${error.code})` : String(error), "error");
}

// -- router ------------------------------------------------------------------------------------------------
const VIEWS = {
  scopes: showScopes, memories: showMemories, memory: showMemory, entities: showEntities, entity: showEntity,
  search: showSearch, forgetting: showForgetting, actions: showActions,
};
// The view whose navigation link a view belongs under.
const PARENT_VIEW = { memory: "memories", entity: "entities" };

async function render() {
  const [path, query = ""] = window.location.hash.replace(/^#\/?/, "").split("?");
  const [name, arg] = path.split("/");
  const view = VIEWS[name] ? name : "scopes";
  readScope(new URLSearchParams(query));
  for (const section of document.querySelectorAll("main > section")) section.hidden = section.dataset.view !== view;
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === view || link.dataset.view === PARENT_VIEW[view]) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
  status("");
  document.body.dataset.view = view;
  try {
    await VIEWS[view](arg ? decodeURIComponent(arg) : null);
    document.body.dataset.loaded = view;
  } catch (error) {
    failed(error);
    document.body.dataset.loaded = `${view}:error`;
  }
}

function countCells(counts) {
  return [h("td", { class: "num" }, String(counts.active)), h("td", { class: "num" }, String(counts.archived)),
    h("td", { class: "num" }, String(counts.deleted))];
}

// -- Scopes ------------------------------------------------------------------------------------------------
async function showScopes() {
  const body = $("users").tBodies[0];
  if (!body.dataset.loaded) {
    body.dataset.loaded = "yes";
    state.usersCursor = null;
    await loadUsers();
  }
  if (state.user) await showAgents(state.user);
}

async function loadUsers() {
  const body = $("users").tBodies[0];
  let page;
  try {
    page = await api("GET", "/users", { query: { limit: PAGE_SIZE, cursor: state.usersCursor } });
  } catch (error) {
    if (!(error instanceof ApiError) || ![403, 501].includes(error.status)) throw error;
    $("users-note").hidden = false;
    $("users-note").textContent = `Users cannot be listed here (${error.message}). Open a user by id above.`;
    return;
  }
  for (const user of page.users) {
    const open = h("button", { type: "button", class: "link", "data-user": user.user_id,
      onclick: () => { window.location.hash = `#/scopes?user=${encodeURIComponent(user.user_id)}`; } });
    open.textContent = user.user_id;
    body.append(h("tr", {}, h("th", { scope: "row" }, open), countCells(user.counts)));
  }
  if (!page.users.length && !body.rows.length) body.append(h("tr", {}, h("td", { colspan: 4 }, "No memories yet.")));
  state.usersCursor = page.next_cursor;
  $("users-more").hidden = !page.next_cursor;
}

async function showAgents(userId) {
  const page = await api("GET", `/users/${encodeURIComponent(userId)}/agents`);
  $("agents-title").textContent = `Agents of ${userId}`;
  const body = $("agents").tBodies[0];
  body.replaceChildren();
  for (const agent of page.agents) {
    const link = text("a", agent.agent_id, {
      href: `#/memories?user=${encodeURIComponent(userId)}&agent=${encodeURIComponent(agent.agent_id)}`,
      "data-agent": agent.agent_id,
    });
    body.append(h("tr", {}, h("th", { scope: "row" }, link), countCells(agent.counts)));
  }
  if (!page.agents.length) body.append(h("tr", {}, h("td", { colspan: 4 }, "This user holds no memories.")));
}

// -- Memories ----------------------------------------------------------------------------------------------
function memoryLink(memory, label) {
  return text("a", label ?? memory.memory, {
    href: `#/memory/${encodeURIComponent(memory.id)}${scopeQuery()}`, "data-memory-id": memory.id,
  });
}

async function showMemories() {
  if (!needScope()) return;
  const form = $("memory-filters");
  const page = await api("GET", "/memories", {
    query: {
      user_id: state.user, agent_id: state.agent, status: form.elements.status.value,
      category: form.elements.category.value.trim(), kind: form.elements.kind.value,
      order: form.elements.order.value, offset: state.offset, limit: PAGE_SIZE,
      include_superseded: form.elements.include_superseded.checked ? "true" : "",
    },
  });
  const body = $("memories").tBodies[0];
  body.replaceChildren();
  for (const memory of page.memories) {
    body.append(h("tr", { "data-memory-id": memory.id },
      h("td", { class: "memory" }, memoryLink(memory)),
      h("td", {}, h("span", { class: `badge ${memory.status}` }, memory.status),
        ...(memory.valid_until ? [" ", h("span", { class: "badge superseded" }, "superseded")] : [])),
      text("td", memory.category), h("td", {}, memory.kind),
      h("td", { class: "num" }, fixed(memory.importance)),
      h("td", { class: "num" }, h("meter", { min: 0, max: 1, value: memory.retention_score, "aria-hidden": "true" }),
        ` ${fixed(memory.retention_score)}`),
      h("td", { class: "num" }, String(memory.access_count)), h("td", { class: "time" }, when(memory.updated_at))));
  }
  const first = page.total ? state.offset + 1 : 0;
  $("memories-caption").textContent =
    `${first.toLocaleString("en")}–${(state.offset + page.memories.length).toLocaleString("en")} of ` +
    `${count(page.total, "memory", "memories")} (${state.user} · ${state.agent})`;
  $("memories-prev").disabled = state.offset === 0;
  $("memories-next").disabled = page.next_offset === null;
  $("memories-next").dataset.offset = page.next_offset ?? "";
}

// -- A memory ----------------------------------------------------------------------------------------------
const SHOWN_FIELDS = ["id", "status", "kind", "category", "importance", "confidence", "retention_score",
  "access_count", "source", "created_at", "updated_at", "last_accessed_at", "expires_at", "valid_from",
  "valid_until", "event_at", "event_until", "summary"];
const COMPARED = ["memory", "summary", "category", "importance", "confidence", "status", "kind", "expires_at"];

async function showMemory(memoryId) {
  if (!needScope() || !memoryId) return;
  const scope = { user_id: state.user, agent_id: state.agent };
  const memory = await api("GET", `/memories/${encodeURIComponent(memoryId)}`, { query: scope });
  state.memory = memory;
  const quote = $("memory-text");
  quote.replaceChildren(text("span", memory.memory));
  const fields = $("memory-fields");
  fields.replaceChildren();
  for (const name of SHOWN_FIELDS) {
    const value = memory[name];
    if (value === null || value === "" || value === undefined) continue;
    fields.append(h("dt", {}, name.replace(/_/g, " ")),
      text("dd", typeof value === "number" && !Number.isInteger(value) ? fixed(value, 3) : String(value)));
  }
  const provenance = $("memory-provenance");
  provenance.replaceChildren();
  for (const source of memory.provenance) {
    const span = source.end > source.start ? `, characters ${source.start}–${source.end}` : "";
    provenance.append(text("li", `turn ${source.turn_id}, message ${source.message + 1}${span}` +
      `${source.speaker ? `, said by ${source.speaker}` : ""}`));
  }
  if (!memory.provenance.length) provenance.append(h("li", {}, "No recorded source (imported or older memory)."));
  renderChain(memory);
  renderHistory(memory.history);
  $("memory-delete").hidden = memory.status === "deleted";
  $("memory-delete-confirm").hidden = true;
  const curves = await api("GET", "/forgetting/curves", { query: { ...scope, ids: memory.id, days: CURVE_DAYS } });
  $("memory-curve").replaceChildren(retentionChart(curves.curves, {
    threshold: curves.policy.archive_threshold, days: curves.days,
    label: `Retention of this memory over the next ${curves.days} days`,
  }), h("p", { class: "note" }, fadeText(curves.curves[0])));
}

function renderChain(memory) {
  const chain = $("memory-chain");
  chain.replaceChildren();
  const since = memory.valid_from ? `since ${when(memory.valid_from)}` : "since it was stored";
  if (memory.superseded_by) {
    chain.append(h("li", {}, `Held ${memory.valid_from ? `from ${when(memory.valid_from)} ` : ""}until ` +
      `${when(memory.valid_until)}; no longer current. Replaced by `,
      memoryLink({ id: memory.superseded_by }, `memory ${memory.superseded_by}`), "."));
  } else {
    chain.append(h("li", {}, `Current ${since}.`));
  }
  const earlier = memory.metadata?.earlier_values ?? [];
  for (const id of [...earlier].reverse()) {
    chain.append(h("li", {}, "Before that: ", memoryLink({ id }, `memory ${id}`), " (what it held earlier)."));
  }
}

function fadeText(curve) {
  if (curve.archives_in_days === null) return "Recalls keep it above the archive threshold for good.";
  if (curve.archives_in_days === 0) return "It is at or below the archive threshold now.";
  return `Archived in ${Math.ceil(curve.archives_in_days)} days unless it is recalled or restated.`;
}

function renderHistory(history) {
  const list = $("memory-history");
  list.replaceChildren();
  for (const entry of history) {
    const item = h("li", { class: `event ${entry.event.toLowerCase()}`, "data-event": entry.event },
      h("span", { class: "badge" }, entry.event), " ", h("time", { datetime: entry.at }, when(entry.at)),
      text("p", entry.reason, { class: "reason" }));
    if (entry.turn_id) item.append(text("p", `turn ${entry.turn_id}`, { class: "note" }));
    const changes = h("dl", { class: "diff" });
    for (const name of COMPARED) {
      const before = entry.before?.[name];
      const after = entry.after?.[name];
      if (entry.before && entry.after && JSON.stringify(before) === JSON.stringify(after)) continue;
      if (before === undefined && after === undefined) continue;
      if (!entry.before && name !== "memory") continue;
      changes.append(h("dt", {}, name));
      const dd = h("dd", {});
      if (entry.before) dd.append(text("del", String(before ?? "—")));
      if (entry.before && entry.after) dd.append(" → ");
      if (entry.after) dd.append(text("ins", String(after ?? "—")));
      changes.append(dd);
    }
    if (changes.childNodes.length) item.append(changes);
    list.append(item);
  }
  if (!history.length) list.append(h("li", {}, "No recorded decisions."));
}

async function deleteMemory(memoryId) {
  const deleted = await api("DELETE", `/memories/${encodeURIComponent(memoryId)}`, {
    query: { user_id: state.user, agent_id: state.agent },
  });
  status(`Memory ${deleted.id} is now ${deleted.status}.`);
  return deleted;
}

// -- Entities ----------------------------------------------------------------------------------------------
const entityName = (entity) => entity.name ?? `(${entity.relation})`;

function entityLink(entity) {
  return text("a", entityName(entity), {
    href: `#/entity/${encodeURIComponent(entity.id)}${scopeQuery()}`, "data-entity-id": entity.id,
  });
}

async function showEntities() {
  if (!needScope()) return;
  const body = $("entities").tBodies[0];
  body.replaceChildren();
  $("entities-note").hidden = true;
  let page;
  try {
    page = await api("GET", "/entities", { query: { user_id: state.user, agent_id: state.agent } });
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 501) throw error;
    $("entities-note").hidden = false;
    $("entities-note").textContent = `Entities cannot be shown here (${error.message}).`;
    $("entities-caption").textContent = "";
    return;
  }
  for (const entity of page.entities) {
    body.append(h("tr", { "data-entity-id": entity.id },
      h("th", { scope: "row" }, entityLink(entity)), h("td", {}, entity.kind), text("td", entity.relation ?? ""),
      text("td", entity.aliases.join(", ")), h("td", { class: "time" }, when(entity.first_mentioned)),
      h("td", { class: "time" }, when(entity.last_mentioned)), h("td", { class: "num" }, String(entity.memory_count))));
  }
  if (!page.entities.length) body.append(h("tr", {}, h("td", { colspan: 7 }, "The memories of this scope name nobody.")));
  $("entities-caption").textContent = `${count(page.entities.length, "entity", "entities")} (${state.user} · ${state.agent})`;
}

async function showEntity(entityId) {
  if (!needScope() || !entityId) return;
  const entity = await api("GET", `/entities/${encodeURIComponent(entityId)}`, {
    query: { user_id: state.user, agent_id: state.agent },
  });
  state.entity = entity;
  $("h-entity").textContent = `${entityName(entity)} · ${entity.kind}`;
  const fields = $("entity-fields");
  fields.replaceChildren();
  for (const [name, value] of [["id", entity.id], ["kind", entity.kind], ["name", entity.name],
    ["relation", entity.relation], ["aliases", entity.aliases.join(", ")],
    ["first mentioned", when(entity.first_mentioned)], ["last mentioned", when(entity.last_mentioned)]]) {
    if (value) fields.append(h("dt", {}, name), text("dd", value));
  }
  $("entity-memories-title").textContent = `Its ${count(entity.memories.length, "memory", "memories")}`;
  const body = $("entity-memories").tBodies[0];
  body.replaceChildren();
  for (const memory of entity.memories) {
    body.append(h("tr", { "data-memory-id": memory.id },
      h("td", { class: "memory" }, memoryLink(memory)),
      h("td", {}, h("span", { class: `badge ${memory.status}` }, memory.status)), text("td", memory.category),
      h("td", { class: "num" }, fixed(memory.retention_score)), h("td", { class: "time" }, when(memory.updated_at))));
  }
  $("entity-forget").hidden = false;
  $("entity-forget-confirm").hidden = true;
}

async function forgetEntity() {
  const entity = state.entity;
  const report = await api("DELETE", `/entities/${encodeURIComponent(entity.id)}`, {
    query: { user_id: state.user, agent_id: state.agent },
  });
  window.location.hash = `#/entities${scopeQuery()}`;
  await new Promise((resolve) => { window.addEventListener("hashchange", resolve, { once: true }); });
  status(`Forgot ${entityName(report.entity)}: ${count(report.forgotten.length, "memory", "memories")} deleted` +
    `${report.entity_removed ? ", and the entity with them" : "; a memory naming it came meanwhile, so it stays"}.`);
}

// -- Search playground -------------------------------------------------------------------------------------
async function showSearch() {
  needScope();
}

function searchBody(form, profile) {
  const value = (name) => form.elements[name].value.trim();
  const body = {
    user_id: state.user, agent_id: state.agent, query: value("query"), mode: value("mode"),
    ranking_profile: profile, top: Number(value("top") || 10), include_archived: form.elements.include_archived.checked,
    include_superseded: form.elements.include_superseded.checked, recall: false,
  };
  if (value("category")) body.category = value("category");
  if (value("kind")) body.kind = value("kind");
  if (value("vector_weight")) body.vector_weight = Number(value("vector_weight"));
  if (value("min_importance")) body.min_importance = Number(value("min_importance"));
  return body;
}

async function runSearch(event) {
  event.preventDefault();
  if (!needScope()) return;
  const form = event.target;
  const profiles = [form.elements.ranking_profile.value];
  if (form.elements.compare.checked) profiles.push(form.elements.second_profile.value);
  const results = $("search-results");
  results.replaceChildren();
  results.classList.toggle("compare", profiles.length > 1);
  try {
    const answers = await Promise.all(profiles.map((p) => api("POST", "/memories/search", { body: searchBody(form, p) })));
    const scale = scales(answers.flatMap((a) => a.hits));
    answers.forEach((answer, i) => results.append(hitList(answer, profiles[i], scale)));
    $("search-summary").textContent = summarize(answers, profiles);
    document.body.dataset.searched = String(Date.now());
  } catch (error) {
    failed(error);
  }
}

function hitList(answer, profile, scale) {
  const column = h("section", { class: "hits", "data-profile": profile, "aria-label": `Results ranked by ${profile}` },
    h("h3", {}, `${profile} · ${answer.mode}`));
  for (const note of answer.notes) column.append(text("p", note, { class: "note" }));
  const list = h("ol", {});
  for (const hit of answer.hits) {
    const memory = hit.memory;
    list.append(h("li", { class: "hit", "data-memory-id": memory.id },
      h("p", { class: "hit-text" }, memoryLink(memory)),
      h("p", { class: "meta" }, `${[...new Set([memory.kind, memory.category])].join(" · ")} · ` +
        `importance ${fixed(memory.importance)} · ` +
        `retention ${fixed(memory.retention_score)} · ${count(memory.access_count, "recall", "recalls")} · ` +
        `updated ${when(memory.updated_at)} · id ${memory.id}`),
      breakdownChart(hit, scale)));
  }
  if (!answer.hits.length) list.append(h("li", {}, "Nothing found."));
  column.append(list);
  return column;
}

function summarize(answers, profiles) {
  const firsts = answers.map((a) => a.hits[0]?.memory);
  const line = firsts.map((m, i) => `${profiles[i]} puts ${m ? `“${m.memory}” (${m.id})` : "nothing"} first`).join("; ");
  if (firsts.length === 2 && firsts[0] && firsts[1] && firsts[0].id !== firsts[1].id) return `${line}. The order flips.`;
  return `${line}.`;
}

// -- Forgetting --------------------------------------------------------------------------------------------
async function showForgetting() {
  if (!needScope()) return;
  const scope = { user_id: state.user, agent_id: state.agent };
  const weakest = await api("GET", "/memories", {
    query: { ...scope, status: "active", order: "retention_score asc", limit: CURVE_COUNT },
  });
  const legend = $("curves-legend");
  legend.replaceChildren();
  if (!weakest.memories.length) {
    $("curves").replaceChildren(h("p", { class: "note" }, "No active memories."));
    $("policy").textContent = "";
    return;
  }
  const ids = weakest.memories.map((m) => m.id).join(",");
  const curves = await api("GET", "/forgetting/curves", { query: { ...scope, ids, days: CURVE_DAYS } });
  const p = curves.policy;
  $("policy").textContent = `retention = 0.5^(days since last reinforced / ${p.half_life_days}) × ` +
    `(${p.importance_floor} + ${p.importance_weight} × importance) + min(recalls × ${p.access_boost}, ` +
    `${p.access_boost_cap}); archived at or below ${p.archive_threshold}.`;
  $("curves").replaceChildren(retentionChart(curves.curves, {
    threshold: p.archive_threshold, days: curves.days,
    label: `Retention over the next ${curves.days} days of the ${curves.curves.length} least retained active memories`,
  }));
  weakest.memories.forEach((memory, i) => {
    legend.append(h("li", { "data-memory-id": memory.id }, h("span", { class: `swatch c${i % 8}`, "aria-hidden": "true" }),
      memoryLink(memory), h("span", { class: "note" }, ` — ${fadeText(curves.curves[i])}`)));
  });
}

async function previewRun() {
  if (!needScope()) return;
  const report = await api("GET", "/forgetting/preview", { query: { user_id: state.user, agent_id: state.agent } });
  $("preview-summary").textContent = `${count(report.scanned, "memory", "memories")} read: ` +
    `${report.archived} would be archived (${report.expired} of them expired), ${report.reactivated} reactivated, ` +
    `${report.rescored} rescored, ${report.unchanged} unchanged${report.complete ? "" : " (more remain)"}.`;
  const body = $("preview").tBodies[0];
  body.replaceChildren();
  for (const change of report.changes.slice(0, 200)) {
    body.append(h("tr", { "data-change": change.change },
      h("td", {}, h("span", { class: `badge ${change.change}` }, change.change)),
      h("td", {}, memoryLink({ id: change.id, memory: change.id })),
      h("td", {}, change.old_status === change.new_status ? change.new_status : `${change.old_status} → ${change.new_status}`),
      h("td", { class: "num" }, `${fixed(change.old_retention, 3)} → ${fixed(change.new_retention, 3)}`)));
  }
  document.body.dataset.previewed = "yes";
}

// -- Actions -----------------------------------------------------------------------------------------------
async function showActions() {
  const exportForm = $("export-form");
  const purgeForm = $("purge-form");
  if (state.user && !exportForm.elements.user.value) exportForm.elements.user.value = state.user;
  if (state.user && !purgeForm.elements.user.value) purgeForm.elements.user.value = state.user;
  checkPurge();
}

function checkPurge() {
  const form = $("purge-form");
  const user = form.elements.user.value.trim();
  form.querySelector("button").disabled = !user || form.elements.confirm.value.trim() !== user;
}

async function exportUser(event) {
  event.preventDefault();
  const user = event.target.elements.user.value.trim();
  try {
    // Every page, each asked for with the cursor of the one before, put together as one export.
    const parsed = { user_id: user, agent_id: null, count: 0, memories: [], history: [], queued: [], next_cursor: null };
    let cursor = null;
    do {
      const page = await api("GET", `/users/${encodeURIComponent(user)}/export`, { query: { cursor } });
      parsed.memories.push(...page.memories);
      parsed.history.push(...page.history);
      parsed.queued.push(...page.queued);
      cursor = page.next_cursor;
    } while (cursor);
    parsed.count = parsed.memories.length;
    const data = JSON.stringify(parsed);
    const url = URL.createObjectURL(new Blob([data], { type: "application/json" }));
    const link = h("a", { href: url, download: `memory-core-export-${user}.json`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    $("action-result").textContent = `Exported ${count(parsed.count, "memory", "memories")} ` +
      `and ${count(parsed.history.length, "history entry", "history entries")} of ${user}.`;
  } catch (error) {
    failed(error);
  }
}

async function purgeUser(event) {
  event.preventDefault();
  const form = event.target;
  const user = form.elements.user.value.trim();
  if (form.elements.confirm.value.trim() !== user) return;
  try {
    const report = await api("DELETE", `/users/${encodeURIComponent(user)}`, { query: { confirm: "true" } });
    $("action-result").textContent = `Purged ${user}: ${report.purged_memories} memories, ` +
      `${report.purged_history} history entries, ${report.purged_queued} queued messages removed.`;
    form.reset();
    checkPurge();
    $("users").tBodies[0].replaceChildren();
    delete $("users").tBodies[0].dataset.loaded;
  } catch (error) {
    failed(error);
  }
}

async function deleteById(event) {
  event.preventDefault();
  if (!needScope()) return;
  try {
    const deleted = await deleteMemory(event.target.elements.memory.value.trim());
    $("action-result").textContent = `Deleted ${deleted.id}; its history records the deletion.`;
  } catch (error) {
    failed(error);
  }
}

// -- wiring ------------------------------------------------------------------------------------------------
function wire() {
  window.addEventListener("hashchange", render);
  $("open-user").addEventListener("submit", (event) => {
    event.preventDefault();
    const user = event.target.elements.user.value.trim();
    if (user) window.location.hash = `#/scopes?user=${encodeURIComponent(user)}`;
  });
  $("users-more").addEventListener("click", () => loadUsers().catch(failed));
  $("memory-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    state.offset = 0;
    showMemories().catch(failed);
  });
  $("memories-prev").addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - PAGE_SIZE);
    showMemories().catch(failed);
  });
  $("memories-next").addEventListener("click", (event) => {
    state.offset = Number(event.target.dataset.offset || 0);
    showMemories().catch(failed);
  });
  $("memory-delete").addEventListener("click", () => {
    $("memory-delete-confirm").hidden = false;
    $("memory-delete-confirm").focus();
  });
  $("memory-delete-confirm").addEventListener("click", async () => {
    try {
      await deleteMemory(state.memory.id);
      await showMemory(state.memory.id);
    } catch (error) {
      failed(error);
    }
  });
  $("entity-forget").addEventListener("click", () => {
    $("entity-forget-confirm").hidden = false;
    $("entity-forget-confirm").focus();
  });
  $("entity-forget-confirm").addEventListener("click", () => forgetEntity().catch(failed));
  $("search-form").addEventListener("submit", runSearch);
  $("preview-run").addEventListener("click", () => previewRun().catch(failed));
  $("export-form").addEventListener("submit", exportUser);
  $("purge-form").addEventListener("submit", purgeUser);
  $("purge-form").addEventListener("input", checkPurge);
  $("delete-form").addEventListener("submit", deleteById);
  $("forget-credential").hidden = !credential();
  $("forget-credential").addEventListener("click", () => {
    sessionStorage.removeItem(CREDENTIAL_KEY);
    $("forget-credential").hidden = true;
    status("The credential is forgotten.");
  });
  document.querySelector("nav").addEventListener("click", (event) => {
    if (event.target.matches("a")) state.offset = 0;
  });
}

wire();
render();
