// Inline SVG charts drawn from API data: retention curves and score breakdowns. No library; every label
// is set as text (memory text never becomes markup).

const NS = "http://www.w3.org/2000/svg";

/** Create an SVG element with attributes and children (strings become text nodes). */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

const round = (x, digits = 2) => Number(x).toFixed(digits);

/**
 * Retention curves over the coming days, the archive threshold as a dashed line.
 * @param {Array<{id: string, points: number[][], archives_in_days: number|null}>} curves
 * @param {{threshold: number, days: number, label: string}} options
 */
export function retentionChart(curves, { threshold, days, label }) {
  const width = 640, height = 280, left = 44, right = 12, top = 12, bottom = 36;
  const x = (d) => left + (d / days) * (width - left - right);
  const y = (r) => top + (1 - r) * (height - top - bottom);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, class: "retention",
    preserveAspectRatio: "xMidYMid meet",
  }, svg("title", {}, label));
  for (const r of [0, 0.25, 0.5, 0.75, 1]) {
    chart.append(svg("line", { x1: left, x2: width - right, y1: y(r), y2: y(r), class: "gridline" }));
    chart.append(svg("text", { x: left - 6, y: y(r) + 4, class: "tick", "text-anchor": "end" }, round(r)));
  }
  const step = days <= 60 ? 10 : days <= 200 ? 30 : 90;
  for (let d = 0; d <= days; d += step) {
    chart.append(svg("text", { x: x(d), y: height - bottom + 16, class: "tick", "text-anchor": "middle" }, String(d)));
  }
  chart.append(svg("text", { x: (left + width - right) / 2, y: height - 4, class: "axis", "text-anchor": "middle" },
    "days from now"));
  chart.append(svg("line", { x1: left, x2: width - right, y1: y(threshold), y2: y(threshold), class: "threshold" }));
  chart.append(svg("text", { x: width - right - 4, y: y(threshold) - 5, class: "threshold-label", "text-anchor": "end" },
    `archived at or below ${round(threshold)}`));
  curves.forEach((curve, i) => {
    const path = curve.points.map(([d, r]) => `${round(x(d), 1)},${round(y(r), 1)}`).join(" ");
    chart.append(svg("polyline", { points: path, class: `curve c${i % 8}`, "data-memory-id": curve.id }));
    if (curve.archives_in_days !== null && curve.archives_in_days <= days) {
      chart.append(svg("circle", { cx: x(curve.archives_in_days), cy: y(threshold), r: 4, class: `mark c${i % 8}` }));
    }
  });
  return chart;
}

/** The largest value of ``pick`` over the hits' breakdowns (bars of one chart group share a scale). */
export function scales(hits) {
  const max = (pick) => Math.max(1e-9, ...hits.map((h) => pick(h) ?? 0));
  return {
    keyword: max((h) => h.breakdown.keyword_score),
    vector: max((h) => h.breakdown.vector_score),
    relevance: max((h) => h.breakdown.relevance),
    boost: max((h) => h.breakdown.boost),
    score: max((h) => h.score),
    functionBoost: Math.max(2, ...hits.flatMap((h) => Object.values(h.breakdown.functions || {}))),
  };
}

const FUNCTION_NAMES = {
  importance: "importance boost", retention_score: "retention boost",
  access_count: "recalls boost", updated_at: "freshness boost",
};

/**
 * One hit's score breakdown as labelled horizontal bars: BM25 and vector legs (score and rank), the
 * fused relevance, each boost of the profile, the multiplier and the final score.
 */
export function breakdownChart(hit, scale) {
  const b = hit.breakdown;
  const rows = [];
  const rank = (r) => (r === null || r === undefined ? "not in this leg" : `rank ${r + 1}`);
  rows.push(["BM25", b.keyword_score ?? 0, scale.keyword,
    b.keyword_score === null ? rank(null) : `${round(b.keyword_score, 3)} · ${rank(b.keyword_rank)}`, "leg"]);
  rows.push(["vector", b.vector_score ?? 0, scale.vector,
    b.vector_score === null ? rank(null) : `${round(b.vector_score, 3)} · ${rank(b.vector_rank)}`, "leg"]);
  rows.push(["fused relevance", b.relevance, scale.relevance, round(b.relevance, 4), "relevance"]);
  for (const [field, value] of Object.entries(b.functions || {})) {
    rows.push([FUNCTION_NAMES[field] || `${field} boost`, value - 1, scale.functionBoost - 1, `×${round(value, 3)}`, "boost"]);
  }
  if (b.profile) rows.push(["multiplier", b.boost, scale.boost, `×${round(b.boost, 3)}`, "boost"]);
  rows.push(["score", hit.score, scale.score, round(hit.score, 4), "score"]);
  const width = 420, rowHeight = 20, labelWidth = 128, valueWidth = 118;
  const barWidth = width - labelWidth - valueWidth;
  const label = `Score breakdown: ${rows.map((r) => `${r[0]} ${r[3]}`).join(", ")}`;
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${rows.length * rowHeight + 4}`, role: "img", "aria-label": label, class: "breakdown",
  }, svg("title", {}, label));
  rows.forEach(([name, value, max, text, kind], i) => {
    const yTop = i * rowHeight + 2;
    const length = Math.max(0, Math.min(1, max > 0 ? value / max : 0)) * barWidth;
    chart.append(
      svg("text", { x: 0, y: yTop + 14, class: "bar-label" }, name),
      svg("rect", { x: labelWidth, y: yTop + 3, width: barWidth, height: 12, class: "bar-track" }),
      svg("rect", { x: labelWidth, y: yTop + 3, width: round(length, 1), height: 12, class: `bar ${kind}`,
        "data-part": name }),
      svg("text", { x: labelWidth + barWidth + 6, y: yTop + 14, class: "bar-value" }, text),
    );
  });
  return chart;
}
