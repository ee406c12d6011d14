"""Every view of the inspector, in a real browser against a real server (see ``conftest.py``).

The tests share one browser and one server and run in file order, as a person would use the page:
sign in with the token, pick a scope, read the table and a memory, search (the reference example flips
between the two profiles; a Japanese query finds Japanese memories), look at forgetting and at the
entities (forgetting one), then delete, export and purge. Each view is saved as a screenshot (``inspector-<view>.png``).
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser.conftest import AGENT, OTHER_USER, TOKEN, USER
from integration.runtime_helpers import RunningRuntime

pytestmark = pytest.mark.browser

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCOPE = f"user={USER}&agent={AGENT}"


def wait(driver: Any, condition: Any, timeout: float = 15.0) -> Any:
    """Wait for ``condition``; on a timeout, say what the page showed (its status line and view)."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(
            condition
        )
    except TimeoutException:
        shown = driver.execute_script(
            "return [document.body.dataset.loaded, document.getElementById('status').textContent]"
        )
        raise AssertionError(f"the page did not get there in {timeout} s; it shows {shown}") from None


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def one(driver: Any, selector: str) -> Any:
    found = css(driver, selector)
    assert found, f"nothing matches {selector!r}"
    return found[0]


def open_view(driver: Any, base: str, fragment: str, view: str) -> None:
    """Navigate to ``#fragment`` and wait until the view says it has loaded."""
    driver.execute_script("document.body.dataset.loaded = ''")
    target = f"{base}/#{fragment}"
    if driver.current_url == target:  # the same address: no hashchange, so load the page again
        driver.refresh()
    else:
        driver.get(target)
    wait(driver, lambda d: d.execute_script("return document.body.dataset.loaded") in (view, f"{view}:error"))
    assert driver.execute_script("return document.body.dataset.loaded") == view, one(driver, "#status").text


def shoot(driver: Any, folder: Path, name: str) -> None:
    """Save the whole page (the window grown to its height, at most 2,000 pixels) as ``inspector-<name>.png``."""
    size = driver.get_window_size()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(size["width"], min(max(height + 120, size["height"]), 2000))
    try:
        driver.save_screenshot(str(folder / f"inspector-{name}.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])


@pytest.fixture(scope="module")
def base(server: RunningRuntime) -> str:
    assert server.runtime.server is not None
    return f"http://127.0.0.1:{server.runtime.server.port}"


def api(server: RunningRuntime, method: str, path: str) -> Any:
    reply = server.client.request(method, f"/api{path}", headers=AUTH)
    assert reply.status == 200, reply.body
    return reply.body


def test_the_page_is_static_and_locked_down(server: RunningRuntime, base: str) -> None:
    with urllib.request.urlopen(f"{base}/") as page:
        headers, body = page.headers, page.read()
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    policy = headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe" not in policy
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert b"<script>" not in body and b" on" + b"click=" not in body  # no inline script
    assert server.client.get("/api/users").status == 401  # the data still needs the token


def test_scopes_after_asking_for_the_token_once(browser: Any, base: str, screenshots: Path) -> None:
    browser.get(f"{base}/#/scopes")
    secret = wait(
        browser,
        lambda d: next((e for e in css(d, "#credential input[name=secret]") if e.is_displayed()), None),
    )
    secret.send_keys(TOKEN)
    one(browser, "#credential button[type=submit]").click()
    wait(browser, lambda d: len(css(d, "#users tbody tr")) == 2)
    users = [e.text for e in css(browser, "#users tbody th button")]
    assert users == [USER, OTHER_USER]
    one(browser, f"#users button[data-user='{USER}']").click()
    wait(browser, lambda d: len(css(d, "#agents tbody th a")) == 1)
    row = one(browser, "#agents tbody tr")
    assert row.find_elements("css selector", "th a")[0].text == AGENT
    active = int(row.find_elements("css selector", "td")[0].text)
    assert active >= 9
    assert browser.execute_script("return sessionStorage.getItem('memory-core.credential')") is not None
    shoot(browser, screenshots, "scopes")


def test_memories_are_paged_sorted_and_filtered_on_the_server(
    browser: Any, base: str, server: RunningRuntime, screenshots: Path
) -> None:
    open_view(browser, base, f"/memories?{SCOPE}", "memories")
    total = api(server, "GET", f"/memories?user_id={USER}&agent_id={AGENT}&order=updated_at%20desc&limit=1")[
        "total"
    ]
    assert f"of {total} memories" in one(browser, "#memories-caption").text
    assert len(css(browser, "#memories tbody tr")) == total  # under one page
    order = one(browser, "#memory-filters select[name=order]")
    from selenium.webdriver.support.ui import Select

    Select(order).select_by_value("importance desc")
    one(browser, "#memory-filters button[type=submit]").click()
    wait(browser, lambda d: css(d, "#memories tbody tr")[0].get_attribute("data-memory-id") == "ref-a")
    window = one(browser, "#memories tbody tr[data-memory-id='ja-window'] td.memory a")
    assert window.text == "窓側の席が好き" and window.get_attribute("lang") == "ja"
    shoot(browser, screenshots, "memories")
    one(browser, "#memory-filters input[name=category]").send_keys("constraint")
    one(browser, "#memory-filters button[type=submit]").click()
    wait(browser, lambda d: len(css(d, "#memories tbody tr")) < total)
    rows = css(browser, "#memories tbody tr")
    assert {"ja-spicy", "en-peanut"} <= {r.get_attribute("data-memory-id") for r in rows}
    assert {r.find_elements("css selector", "td")[2].text for r in rows} == {"constraint"}
    assert f"of {len(rows)} memories" in one(browser, "#memories-caption").text
    one(browser, "#memory-filters input[name=category]").clear()
    one(browser, "#memory-filters button[type=submit]").click()


def test_a_memory_with_its_provenance_history_and_curve(
    browser: Any, base: str, server: RunningRuntime, screenshots: Path
) -> None:
    facts = api(server, "GET", f"/memories?user_id={USER}&agent_id={AGENT}&kind=fact&order=updated_at%20desc")
    vegetarian = next(m for m in facts["memories"] if "vegetarian" in m["memory"] and m["provenance"])
    open_view(browser, base, f"/memory/{vegetarian['id']}?{SCOPE}", "memory")
    assert one(browser, "#memory-text").text == vegetarian["memory"]
    assert css(browser, "#memory-provenance li")[0].text.startswith("turn t")
    events = [e.get_attribute("data-event") for e in css(browser, "#memory-history li")]
    assert events[0] == "ADD" and len(events) >= 2, events  # restated or updated by the fourth turn
    assert len(css(browser, "#memory-curve svg polyline.curve")) == 1
    assert len(css(browser, "#memory-curve svg line.threshold")) == 1
    shoot(browser, screenshots, "memory")


def test_a_replaced_value_is_listed_when_asked_for_and_its_chain_is_shown(browser: Any, base: str) -> None:
    open_view(browser, base, f"/memories?{SCOPE}", "memories")
    ids = {r.get_attribute("data-memory-id") for r in css(browser, "#memories tbody tr")}
    assert "home-now" in ids and "home-before" not in ids  # what holds now, only
    one(browser, "#memory-filters input[name=include_superseded]").click()
    one(browser, "#memory-filters button[type=submit]").click()
    wait(browser, lambda d: bool(css(d, "#memories tbody tr[data-memory-id='home-before']")))
    row = one(browser, "#memories tbody tr[data-memory-id='home-before']")
    assert "superseded" in row.text
    one(browser, "#memory-filters input[name=include_superseded]").click()
    one(browser, "#memory-filters button[type=submit]").click()
    open_view(browser, base, f"/memory/home-before?{SCOPE}", "memory")
    wait(browser, lambda d: one(d, "#memory-text").text == "lives in Berlin")
    (held,) = css(browser, "#memory-chain li")
    assert "no longer current" in held.text
    assert held.find_element("css selector", "a").get_attribute("data-memory-id") == "home-now"
    open_view(browser, base, f"/memory/home-now?{SCOPE}", "memory")
    wait(browser, lambda d: one(d, "#memory-text").text == "lives in Munich")
    lines = css(browser, "#memory-chain li")
    assert lines[0].text.startswith("Current since")
    assert lines[1].find_element("css selector", "a").get_attribute("data-memory-id") == "home-before"


def search(browser: Any, query: str, *, compare: bool = False, profile: str = "important") -> None:
    from selenium.webdriver.support.ui import Select

    box = one(browser, "#search-form input[name=query]")
    box.clear()
    box.send_keys(query)
    Select(one(browser, "#search-form select[name=ranking_profile]")).select_by_value(profile)
    checkbox = one(browser, "#search-form input[name=compare]")
    if checkbox.is_selected() != compare:
        checkbox.click()
    before = browser.execute_script("return document.body.dataset.searched || ''")
    one(browser, "#search-form button[type=submit]").click()
    wait(browser, lambda d: d.execute_script("return document.body.dataset.searched || ''") != before)


def first_hits(browser: Any) -> dict[str, str]:
    return {
        column.get_attribute("data-profile"): column.find_elements("css selector", "li.hit")[0].get_attribute(
            "data-memory-id"
        )
        for column in css(browser, "#search-results section.hits")
    }


def test_search_draws_breakdowns_and_the_reference_example_flips(
    browser: Any, base: str, server: RunningRuntime, screenshots: Path
) -> None:
    open_view(browser, base, f"/search?{SCOPE}", "search")
    top = one(browser, "#search-form input[name=top]")
    top.clear()
    top.send_keys("4")
    search(browser, "aisle seat flights", compare=True)
    assert first_hits(browser) == {"important": "ref-a", "recent": "ref-b"}
    assert "The order flips" in one(browser, "#search-summary").text
    parts = [
        e.get_attribute("data-part")
        for e in css(browser, "section[data-profile=important] li.hit")[0].find_elements(
            "css selector", "svg.breakdown rect.bar"
        )
    ]
    assert parts[:3] == ["BM25", "vector", "fused relevance"] and parts[-1] == "score"
    assert {"importance boost", "retention boost", "recalls boost"} <= set(parts)
    recent = [e.get_attribute("data-part") for e in css(browser, "section[data-profile=recent] rect.bar")]
    assert "freshness boost" in recent
    shoot(browser, screenshots, "search")
    server.drain()  # a recall would travel the queue: let it land before looking
    hit = api(server, "GET", f"/memories/ref-a?user_id={USER}&agent_id={AGENT}")
    assert hit["access_count"] == 20  # the playground never counts as a recall


def test_a_japanese_query_returns_japanese_memories(browser: Any, base: str) -> None:
    open_view(browser, base, f"/search?{SCOPE}", "search")
    search(browser, "窓側の席")
    assert first_hits(browser) == {"important": "ja-window"}
    text = one(browser, "li.hit .hit-text a")
    assert text.text == "窓側の席が好き" and text.get_attribute("lang") == "ja"
    search(browser, "紅茶")
    hits = [e.text for e in css(browser, "li.hit .hit-text a")]
    assert hits and "紅茶" in hits[0], hits  # the Japanese turn that went through the pipeline


def test_forgetting_curves_and_the_dry_run_of_the_scope(
    browser: Any, base: str, server: RunningRuntime, screenshots: Path
) -> None:
    open_view(browser, base, f"/forgetting?{SCOPE}", "forgetting")
    curves = css(browser, "#curves svg polyline.curve")
    assert len(curves) == 8
    assert curves[0].get_attribute("data-memory-id") == "old-taxi"  # the least retained first
    assert "archived at or below 0.22" in one(browser, "#curves svg").text
    one(browser, "#preview-run").click()
    wait(browser, lambda d: d.execute_script("return document.body.dataset.previewed") == "yes")
    changes = {
        (r.get_attribute("data-change"), r.find_elements("css selector", "a")[0].text)
        for r in css(browser, "#preview tbody tr")
    }
    assert {("archive", "old-hotel"), ("archive", "old-taxi")} <= changes
    assert "would be archived" in one(browser, "#preview-summary").text
    shoot(browser, screenshots, "forgetting")
    assert api(server, "GET", f"/memories/old-hotel?user_id={USER}&agent_id={AGENT}")["status"] == "active"


def test_memory_text_is_shown_as_text_never_as_markup(
    browser: Any, base: str, server: RunningRuntime
) -> None:
    hostile = "<img src=x onerror=\"document.title='pwned'\"> <b>bold</b>"
    reply = server.client.post(
        "/api/turns",
        {
            "schema": "memory-core.turn.v1",
            "turn_id": "t-hostile",
            "user_id": USER,
            "agent_id": AGENT,
            "occurred_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "messages": [{"role": "user", "text": f"I like {hostile}"}],
        },
        headers=AUTH,
    )
    assert reply.status == 202
    server.drain()
    open_view(browser, base, f"/memories?{SCOPE}", "memories")
    cells = [e for e in css(browser, "#memories td.memory a") if "<img" in e.text]
    assert cells and not css(browser, "#memories td.memory img, #memories td.memory b")
    assert browser.title == "memory-core inspector"
    # The same text in every other view that shows it: one memory with its history, search hits.
    listed = api(server, "GET", f"/memories?user_id={USER}&agent_id={AGENT}&limit=1000")["memories"]
    hostile_ids = [m["id"] for m in listed if "<img" in m["memory"]]
    assert hostile_ids
    for memory_id in hostile_ids:
        open_view(browser, base, f"/memory/{memory_id}?{SCOPE}", "memory")
        wait(browser, lambda d: bool(css(d, "#memory-history li")))
        assert "<img" in one(browser, "main section[data-view=memory]").text
        assert not css(browser, "main img, main b")
    open_view(browser, base, f"/search?{SCOPE}", "search")
    search(browser, "bold img")
    assert any("<img" in e.text for e in css(browser, "li.hit .hit-text a"))
    assert not css(browser, "main img, main b")
    assert browser.title == "memory-core inspector"


def test_entities_with_their_memories_and_forgetting_one(
    browser: Any, base: str, server: RunningRuntime, screenshots: Path
) -> None:
    for text in ("My sister Ana moved to Lisbon.", "Ana teaches chemistry at a high school."):
        body = {"user_id": USER, "agent_id": AGENT, "messages": text, "infer": False}
        assert server.client.post("/api/memories", body, headers=AUTH).status == 200
    listed = api(server, "GET", f"/entities?user_id={USER}&agent_id={AGENT}")["entities"]
    ana = next(e for e in listed if e["name"] == "Ana")
    open_view(browser, base, f"/entities?{SCOPE}", "entities")
    rows = css(browser, "#entities tbody tr")
    assert [r.get_attribute("data-entity-id") for r in rows] == [e["id"] for e in listed]
    cells = [c.text for c in one(browser, f"#entities tr[data-entity-id='{ana['id']}']").find_elements("css selector", "th, td")]
    assert cells[:3] == ["Ana", "person", "sister"] and cells[-1] == "2"
    assert f"{len(listed)} entities" in one(browser, "#entities-caption").text
    shoot(browser, screenshots, "entities")
    one(browser, f"#entities a[data-entity-id='{ana['id']}']").click()
    wait(browser, lambda d: d.execute_script("return document.body.dataset.loaded") == "entity")
    assert one(browser, "#h-entity").text == "Ana · person"
    shown = [r.get_attribute("data-memory-id") for r in css(browser, "#entity-memories tbody tr")]
    assert len(shown) == 2 and one(browser, "#entity-memories-title").text == "Its 2 memories"
    assert one(browser, "nav a[data-view=entities]").get_attribute("aria-current") == "page"
    shoot(browser, screenshots, "entity")
    assert not one(browser, "#entity-forget-confirm").is_displayed()
    one(browser, "#entity-forget").click()
    assert api(server, "GET", f"/entities/{ana['id']}?user_id={USER}&agent_id={AGENT}")["memory_count"] == 2
    one(browser, "#entity-forget-confirm").click()
    wait(browser, lambda d: "Forgot Ana: 2 memories deleted, and the entity with them" in one(d, "#status").text)
    wait(browser, lambda d: ana["id"] not in [r.get_attribute("data-entity-id") for r in css(d, "#entities tbody tr")])
    for memory_id in shown:
        assert api(server, "GET", f"/memories/{memory_id}?user_id={USER}&agent_id={AGENT}")["status"] == "deleted"


def test_delete_export_and_purge(
    browser: Any, base: str, server: RunningRuntime, screenshots: Path, downloads: Path
) -> None:
    open_view(browser, base, f"/memory/en-tea?{SCOPE}", "memory")
    one(browser, "#memory-delete").click()
    one(browser, "#memory-delete-confirm").click()
    wait(browser, lambda d: "DELETE" in [e.get_attribute("data-event") for e in css(d, "#memory-history li")])
    assert api(server, "GET", f"/memories/en-tea?user_id={USER}&agent_id={AGENT}")["status"] == "deleted"

    open_view(browser, base, f"/actions?{SCOPE}", "actions")
    export = one(browser, "#export-form input[name=user]")
    assert export.get_attribute("value") == USER
    one(browser, "#export-form button[type=submit]").click()
    target = downloads / f"memory-core-export-{USER}.json"
    wait(browser, lambda d: target.exists() and target.stat().st_size > 0)
    exported = json.loads(target.read_text(encoding="utf-8"))
    assert exported["user_id"] == USER and exported["count"] >= 10
    assert any(m["memory"] == "窓側の席が好き" for m in exported["memories"])

    purge = one(browser, "#purge-form")
    user = purge.find_elements("css selector", "input[name=user]")[0]
    user.clear()
    user.send_keys(OTHER_USER)
    button = purge.find_elements("css selector", "button")[0]
    assert not button.is_enabled()
    purge.find_elements("css selector", "input[name=confirm]")[0].send_keys(OTHER_USER[:-1])
    assert not button.is_enabled()
    purge.find_elements("css selector", "input[name=confirm]")[0].send_keys(OTHER_USER[-1])
    assert button.is_enabled()
    button.click()
    wait(browser, lambda d: "Purged u2" in one(d, "#action-result").text)
    assert "2 memories" in one(browser, "#action-result").text
    shoot(browser, screenshots, "actions")
    users = api(server, "GET", "/users")["users"]
    assert [u["user_id"] for u in users] == [USER]


def test_readable_on_a_phone(browser: Any, base: str, screenshots: Path) -> None:
    browser.set_window_size(390, 844)
    try:
        open_view(browser, base, f"/memories?{SCOPE}", "memories")
        overflow = browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0  # wide tables scroll inside their own box
        shoot(browser, screenshots, "phone")
    finally:
        browser.set_window_size(1280, 1000)
