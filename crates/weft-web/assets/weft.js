// Weft's page script: follows a run's events, swaps in the parts the server renders
// again, and sends the page's actions to the JSON API. Pages read fine without it.
"use strict";

const EVENT_TYPES = [
  "run_started", "run_resumed", "run_completed", "run_failed", "run_paused",
  "run_cancelled", "step_started", "step_completed", "step_failed", "step_retrying",
  "budget_warning", "step_rescued", "loop_started", "loop_iteration", "loop_ended",
  "fan_out_started", "branch_started", "branch_ended", "fan_out_ended", "route_taken",
  "approval_requested", "approval_answered", "llm_delta", "llm_call", "tool_called",
  "warning", "message", "error",
];
const FINAL = new Set(["run_completed", "run_failed", "run_cancelled"]);
const ENDED = new Set(["completed", "failed", "cancelled"]);
// How often a list that follows new runs or approvals reads them again.
const LIST_REFRESH_MS = 2000;
// Events closer together than this are drawn in one go.
const REDRAW_DELAY_MS = 120;
// The status of the run's record that an event announces.
const STATUS_OF = {
  run_paused: "paused", run_completed: "completed", run_failed: "failed",
  run_cancelled: "cancelled",
};
// How often, and how many times, a redraw is repeated until the record shows it.
const RECHECK_MS = 150;
const RECHECKS = 40;

// `in 19 h`, `3 min ago`: how far `d` is from now, roughly.
function relative(d) {
  const s = Math.round((d - Date.now()) / 1000), a = Math.abs(s);
  const n = a < 60 ? [a, "s"] : a < 3600 ? [Math.round(a / 60), "min"]
    : a < 172800 ? [Math.round(a / 3600), "h"] : [Math.round(a / 86400), "days"];
  return s >= 0 ? `in ${n[0]} ${n[1]}` : `${n[0]} ${n[1]} ago`;
}

// Times in the viewer's zone. A time written in a zone of its own (a schedule's,
// `data-zone`) keeps that text and gains the viewer's time when their zone differs,
// and how far off it is.
function localTimes(root) {
  const here = Intl.DateTimeFormat().resolvedOptions().timeZone;
  for (const t of root.querySelectorAll("time[datetime]")) {
    const d = new Date(t.getAttribute("datetime"));
    if (isNaN(d)) continue;
    const zone = t.dataset.zone;
    if (!zone) { t.textContent = d.toLocaleString(); continue; }
    if (!t.dataset.said) t.dataset.said = t.textContent;
    const yours = zone === here ? "" : `; your time ${d.toLocaleString(undefined,
      { weekday: "short", hour: "2-digit", minute: "2-digit", timeZoneName: "short" })}`;
    t.textContent = `${t.dataset.said} (${relative(d)}${yours})`;
  }
}

// A run that has not ended shows its time so far, counting.
function runningDurations() {
  for (const el of document.querySelectorAll("[data-since]")) {
    const ms = Date.now() - Number(el.dataset.since);
    const s = Math.max(0, Math.floor(ms / 1000));
    el.textContent = s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min ${s % 60} s`
      : `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  }
}

async function api(method, url, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(url, init);
  let data = null;
  try { data = await res.json(); } catch (_) { /* no body */ }
  if (!res.ok) {
    const why = data && (data.detail || data.title) || res.statusText;
    const err = new Error(why);
    err.problem = data;
    throw err;
  }
  return data;
}

function showError(near, message) {
  const box = near && near.closest("section, div.run-head, main")
    ?.querySelector(".action-error");
  if (box) {
    box.textContent = message;
    box.hidden = false;
  } else {
    alert(message);
  }
}

// ---- A run, followed live -------------------------------------------------------

class RunView {
  constructor(root) {
    this.root = root;
    this.id = root.dataset.run;
    this.after = root.dataset.after;
    this.streams = new Map(); // step path -> text streamed so far
    this.timer = null;
    this.source = null;
    this.selected = new URL(location.href).searchParams.get("step");
    this.expected = null; // the status an event announced, until a redraw shows it
    this.recheck = 0;
    this.awaited = null; // the last announced status awaited that way
    this.requests = 0; // redraws asked for so far
    if (!ENDED.has(root.dataset.status)) this.follow();
    this.expectAnnounced(root.dataset.status);
    if (this.expected) this.redrawSoon();
  }

  // The page may have read the journal's pause or end and the record from just before
  // it: the announced status is then awaited as if its event had just arrived (once per
  // announcement, so a record that never follows is not read again forever).
  expectAnnounced(status) {
    const announced = this.root.querySelector(".run-head")?.dataset.announced;
    if (!this.expected && announced && announced !== status && announced !== this.awaited) {
      this.awaited = announced;
      this.expected = announced;
      this.recheck = RECHECKS;
    }
  }

  follow() {
    if (this.source) return;
    const q = this.after !== undefined && this.after !== "" ? `?after=${this.after}` : "";
    const source = new EventSource(`/v1/runs/${encodeURIComponent(this.id)}/events${q}`);
    this.source = source;
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (ev) => this.onEvent(type, ev));
    }
  }

  stop() {
    if (this.source) this.source.close();
    this.source = null;
  }

  onEvent(type, ev) {
    let data = {};
    try { data = JSON.parse(ev.data); } catch (_) { /* keep {} */ }
    if (type === "llm_delta") {
      const text = (this.streams.get(data.path) || "") + (data.text || "");
      this.streams.set(data.path, text);
      this.fillStreams();
      return;
    }
    if (ev.lastEventId) this.after = ev.lastEventId;
    if (type === "step_completed" || type === "step_failed") this.streams.delete(data.path);
    if (FINAL.has(type)) this.stop();
    // The run's record says it paused or ended a moment after the event is out (its
    // events are durable first): until a redraw shows that status, draw again.
    const status = STATUS_OF[type];
    if (status) {
      this.expected = status;
      this.recheck = RECHECKS;
    }
    this.redrawSoon();
  }

  fillStreams() {
    for (const pre of this.root.querySelectorAll("pre[data-stream]")) {
      pre.textContent = this.streams.get(pre.dataset.stream) || "";
    }
  }

  redrawSoon() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.redraw(), REDRAW_DELAY_MS);
  }

  async redraw() {
    const url = new URL(`/runs/${encodeURIComponent(this.id)}`, location.href);
    url.searchParams.set("part", "live");
    if (this.selected) url.searchParams.set("step", this.selected);
    // Answers can arrive out of order: only the latest request's may draw, or an
    // older one (a run still running) would replace a newer one (the run paused).
    const request = ++this.requests;
    const res = await fetch(url, { headers: { Accept: "text/html" } });
    if (!res.ok || request !== this.requests) return;
    const html = await res.text();
    if (request !== this.requests) return;
    const typing = this.root.contains(document.activeElement) &&
      document.activeElement.matches("textarea, input");
    if (typing) {
      // Someone is writing a note: draw again once they leave the field.
      document.activeElement.addEventListener("blur", () => this.redrawSoon(), { once: true });
      return;
    }
    const dialogOpen = document.getElementById("retry-dialog")?.open;
    this.root.innerHTML = html;
    localTimes(this.root);
    prefillNames(this.root);
    this.fillStreams();
    const status = this.root.querySelector(".run-head .badge")?.textContent;
    if (status) this.root.dataset.status = status;
    this.expectAnnounced(status);
    if (this.expected && status !== this.expected && this.recheck-- > 0) {
      setTimeout(() => this.redraw(), RECHECK_MS);
    } else {
      this.expected = null;
    }
    if (dialogOpen) document.getElementById("retry-dialog")?.showModal();
    document.title = `${this.root.querySelector("h1")?.firstChild?.textContent?.trim() || "Run"} · ${status} · Weft`;
  }

  select(path) {
    this.selected = path;
    const url = new URL(location.href);
    url.searchParams.set("step", path);
    history.pushState({ step: path }, "", url);
    this.redraw();
  }
}

let runView = null;

// ---- Lists that follow new items ---------------------------------------------------

function refreshLists() {
  for (const el of document.querySelectorAll("[data-refresh]")) {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) continue;
    // A note written and left unsent is not thrown away by a refresh.
    if ([...el.querySelectorAll("textarea")].some((t) => t.value)) continue;
    fetch(el.dataset.refresh, { headers: { Accept: "text/html" } })
      .then((res) => (res.ok ? res.text() : null))
      .then((html) => {
        if (html === null || el.contains(document.activeElement)) return;
        if ([...el.querySelectorAll("textarea")].some((t) => t.value)) return;
        el.innerHTML = html;
        localTimes(el);
        prefillNames(el);
      })
      .catch(() => { /* the server is away: try again next time */ });
  }
}

// ---- Actions ------------------------------------------------------------------------

function prefillNames(root) {
  const name = localStorage.getItem("weft.name") || "";
  for (const input of root.querySelectorAll('input[name="by"]')) {
    if (!input.value) input.value = name;
  }
}

async function answer(button) {
  const box = button.closest("section.approval");
  const by = box.querySelector('input[name="by"]')?.value.trim() || "";
  if (by) localStorage.setItem("weft.name", by);
  const body = {
    decision: button.dataset.decision,
    note: box.querySelector('textarea[name="note"]')?.value || "",
    step: box.dataset.step,
  };
  if (by) body.by = by;
  await api("POST", `/v1/runs/${encodeURIComponent(box.dataset.run)}/approve`, body);
  if (runView && runView.id === box.dataset.run) {
    document.activeElement?.blur();
    runView.follow();
    runView.redraw();
  } else {
    box.closest(".inbox-item")?.remove();
    refreshLists();
  }
}

async function retry(button) {
  await api("POST", `/v1/runs/${encodeURIComponent(button.dataset.run)}/retry`);
  document.getElementById("retry-dialog")?.close();
  if (runView) {
    runView.root.dataset.status = "running";
    runView.follow();
    runView.redraw();
  }
}

async function cancel(button) {
  if (!confirm("Cancel this run? It stops at its next step.")) return;
  await api("POST", `/v1/runs/${encodeURIComponent(button.dataset.run)}/cancel`);
  if (runView) runView.redraw();
}

async function start(button) {
  const field = document.getElementById("input");
  let input;
  try {
    input = JSON.parse(field.value || "{}");
  } catch (e) {
    field.setAttribute("aria-invalid", "true");
    throw new Error(`The input is not JSON: ${e.message}`);
  }
  field.removeAttribute("aria-invalid");
  const run = await api("POST", "/v1/runs", { flow_id: button.dataset.flow, input });
  location.href = `/runs/${encodeURIComponent(run.run_id)}`;
}

async function check() {
  const source = document.getElementById("source").value;
  const dialect = document.getElementById("dialect").value;
  const out = document.getElementById("diagnostics");
  out.textContent = "";
  const body = { source, name: "pasted" };
  if (dialect) body.dialect = dialect;
  try {
    const flow = await api("POST", "/v1/flows", body);
    const next = `/new?flow=${encodeURIComponent(flow.flow_id)}`;
    const warnings = flow.diagnostics || [];
    if (!warnings.length) {
      location.href = next;
      return;
    }
    // Stored, with warnings: the author reads them before going on.
    showDiagnostics(out, source, warnings);
    const go = document.createElement("a");
    go.href = next;
    go.className = "button";
    go.dataset.action = "continue";
    go.textContent = "Continue with this flow";
    out.append(go);
  } catch (e) {
    const diags = (e.problem && e.problem.diagnostics) || [];
    if (!diags.length) throw e;
    showDiagnostics(out, source, diags);
  }
}

// The diagnostics of a pasted flow, each at its line, and the text with those lines
// marked.
function showDiagnostics(out, source, diags) {
  const heading = document.createElement("h3");
  const errors = diags.filter((d) => (d.severity || "error") === "error").length;
  const count = (n, what) => (n === 1 ? `1 ${what}` : `${n} ${what}s`);
  heading.textContent = errors ? count(diags.length, "problem") : count(diags.length, "warning");
  const list = document.createElement("ul");
  list.className = "diagnostics";
  const marked = new Map();
  for (const d of diags) {
    const li = document.createElement("li");
    li.className = `diagnostic ${d.severity || "error"}`;
    const where = d.loc ? `line ${d.loc.line}, column ${d.loc.col}` : (d.pointer || "the flow");
    if (d.loc) marked.set(d.loc.line, d.message);
    const a = document.createElement(d.loc ? "button" : "span");
    a.type = "button";
    a.className = "where";
    a.textContent = where;
    if (d.loc) a.addEventListener("click", () => selectLine(d.loc.line));
    li.append(a, `: ${d.message}`);
    if (d.hint) {
      const hint = document.createElement("div");
      hint.className = "hint";
      hint.textContent = d.hint;
      li.append(hint);
    }
    list.append(li);
  }
  const listing = document.createElement("ol");
  listing.className = "source";
  source.split("\n").forEach((line, i) => {
    const li = document.createElement("li");
    li.textContent = line || " ";
    if (marked.has(i + 1)) {
      li.className = "marked";
      li.title = marked.get(i + 1);
    }
    listing.append(li);
  });
  out.append(heading, list, listing);
}

function selectLine(line) {
  const area = document.getElementById("source");
  const lines = area.value.split("\n");
  const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
  area.focus();
  area.setSelectionRange(start, start + (lines[line - 1] || "").length);
}

const ACTIONS = { answer, retry, cancel, start, check };

document.addEventListener("click", (ev) => {
  const target = ev.target instanceof Element ? ev.target : null;
  if (!target) return;
  const actionButton = target.closest("[data-action]");
  if (actionButton && ACTIONS[actionButton.dataset.action]) {
    ev.preventDefault();
    actionButton.disabled = true;
    ACTIONS[actionButton.dataset.action](actionButton)
      .catch((e) => showError(actionButton, e.message))
      .finally(() => { actionButton.disabled = false; });
    return;
  }
  const opener = target.closest("[data-open]");
  if (opener) {
    document.getElementById(opener.dataset.open)?.showModal();
    return;
  }
  // Choosing a step redraws the run in place rather than loading the page again.
  const link = target.closest("a[href]");
  if (runView && link && runView.root.contains(link)) {
    const url = new URL(link.getAttribute("href") || link.getAttribute("xlink:href"), location.href);
    const step = url.searchParams.get("step");
    if (url.pathname === `/runs/${runView.id}` && step) {
      ev.preventDefault();
      runView.select(step);
    }
  }
});

document.addEventListener("change", (ev) => {
  const select = ev.target instanceof Element && ev.target.closest("select[data-navigate]");
  if (select) location.href = `/new?flow=${encodeURIComponent(select.value)}`;
});

window.addEventListener("popstate", () => {
  if (!runView) return;
  runView.selected = new URL(location.href).searchParams.get("step");
  runView.redraw();
});

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  setInterval(runningDurations, 1000);
  prefillNames(document);
  const live = document.querySelector("#live[data-run]");
  if (live) runView = new RunView(live);
  if (document.querySelector("[data-refresh]")) {
    setInterval(() => { if (!document.hidden) refreshLists(); }, LIST_REFRESH_MS);
  }
});
