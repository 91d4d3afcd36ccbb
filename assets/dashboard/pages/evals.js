// Evals: answers saved from real conversations as cases, scored by assertions and replayed.
// `/app/evals` shows the workspace summary, the pass rate of past suites, every case (the latest
// suite's flaky and regressed cases marked) and runs them all with a progress bar fed by polling
// the suite; `/app/evals?case=<id>` opens one case: its name and assertions (a 400 from the API
// shown on the row and field it names), the frozen conversation and retrieval result, its runs,
// and a run's verdicts and retrieved chunks (`&run=<id>` picks the run).
//
// `SaveAsEvalCase` and `useSavedCases` are the "Save as eval case" action of the conversation and
// inbox pages.

import { useEffect, useState } from "../../vendor/hooks.mjs";
import { ApiError, del, get, patch, post, put } from "../api.js";
import { navigate, setQuery } from "../router.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Checkbox, Empty, ErrorBox, Field, FormError, Input, Loading, Meta, PageHeader, Progress, Select, TextArea,
  confirm, fmtDate, fmtNum, html, namesField, shortId, toast, useAsync, useId, usePoll,
} from "../ui.js";

const TYPES = [
  ["retrieval_includes_document", "Retrieval includes a document"],
  ["retrieval_excludes_document", "Retrieval excludes a document"],
  ["retrieval_top_k_includes_document", "A document is in the top k"],
  ["retrieval_document_order", "Documents are retrieved in this order"],
  ["retrieval_chunk_metadata", "A retrieved chunk has metadata"],
  ["answer_cites_document", "The answer cites a document"],
  ["answer_contains", "The answer contains"],
  ["answer_does_not_contain", "The answer does not contain"],
  ["llm_judge", "A model judges the answer"],
];
const TYPE_LABEL = Object.fromEntries(TYPES);
/** Types scored only when the run answers again (full_assistant). */
const NEEDS_ANSWER = new Set(["answer_cites_document", "answer_contains", "answer_does_not_contain", "llm_judge"]);
/** The fields each type shows (an error naming another field of its row is shown on the row). */
const FIELDS = {
  retrieval_includes_document: ["documentId"],
  retrieval_excludes_document: ["documentId"],
  answer_cites_document: ["documentId"],
  retrieval_top_k_includes_document: ["documentId", "k"],
  retrieval_document_order: ["documentIds"],
  retrieval_chunk_metadata: ["documentId", "metadata"],
  answer_contains: ["pattern", "matchMode", "caseSensitive"],
  answer_does_not_contain: ["pattern", "matchMode", "caseSensitive"],
  llm_judge: ["expectedAnswer", "criteria"],
};
const MAX_ASSERTIONS = 20;
const MAX_ORDER = 100;
const MODES = [["retrieval_only", "Retrieval only"], ["full_assistant", "Full assistant (answers again)"]];
const MODE_LABEL = { retrieval_only: "Retrieval only", full_assistant: "Full assistant" };
const CASE_TONE = { passing: "green", failing: "red", error: "red", pending: "blue" };
const RUN_TONE = { pass: "green", fail: "red", error: "red", recorded: "gray", skipped: "gray" };
const SUITE_TONE = { queued: "blue", running: "blue", completed: "green", failed: "red" };
const MOVING = new Set(["queued", "running"]);

const pct = (r) => (r === null || r === undefined ? "—" : `${Math.round(Number(r) * 100)}%`);
const plural = (n, one, many) => `${fmtNum(n)} ${Number(n) === 1 ? one : many}`;
const caseHref = (id, run) => `/app/evals?case=${encodeURIComponent(id)}${run ? "&run=" + encodeURIComponent(run) : ""}`;

/** "4 s", "3 min" between two timestamps. */
function took(from, to) {
  const a = Date.parse(from);
  const b = Date.parse(to);
  if (isNaN(a) || isNaN(b)) return "—";
  const ms = Math.max(0, b - a);
  if (ms < 1000) return `${ms} ms`;
  if (ms < 90000) return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
  return `${Math.round(ms / 60000)} min`;
}

export default function Evals({ query }) {
  if (query.case) return html`<${CaseDetail} key=${query.case} id=${query.case} runId=${query.run || null} />`;
  return html`<${EvalList} agentId=${query.agentId || ""} />`;
}

// ---------------------------------------------------------------- saving an answer (other pages)

/**
 * Message id → case id of the answers already saved: one request for the whole conversation
 * (`agentId` undefined: not known yet, nothing asked).
 */
export function useSavedCases(agentId) {
  const res = useAsync(
    () => (agentId !== undefined && can("workspace.agents.read") ? get("/evals/cases", { agentId }).catch(() => null) : Promise.resolve(null)),
    [agentId],
  );
  const map = {};
  for (const c of (res.data && res.data.cases) || []) if (c.sourceMessageId) map[c.sourceMessageId] = c.id;
  return map;
}

/**
 * "Save as eval case" under an assistant answer: freezes the conversation up to it (idempotent:
 * a second save opens the same case) and opens the case. "Open eval case" once it is saved.
 */
export function SaveAsEvalCase({ messageId, caseId }) {
  const [busy, setBusy] = useState(false);
  if (caseId) return html`<a href=${caseHref(caseId)} class="btn btn-small ev-save" data-testid="open-eval-case">Open eval case</a>`;
  if (!messageId || !can("workspace.agents.manage")) return null;
  const save = async () => {
    setBusy(true);
    try {
      const r = await put(`/evals/cases/by-source-message/${encodeURIComponent(messageId)}`, {});
      toast(r.created ? "Saved as an eval case. Add assertions to score it." : "This answer is already an eval case.");
      navigate(caseHref(r.case.id));
    } catch (e) {
      toast(e.message, "error");
      setBusy(false);
    }
  };
  return html`<${Button} small busy=${busy} onClick=${save} className="ev-save" testid="save-eval-case"
    title="Keep this answer as a test case: replay it later and check what it retrieves and says">Save as eval case</${Button}>`;
}

// ---------------------------------------------------------------- the list

async function loadHistory(agentId) {
  const r = await get("/evals/suites", { agentId, limit: 30 });
  // comparison sides run candidate revisions: they are not the workspace's history
  const suites = ((r && r.suites) || []).filter((s) => !s.comparisonId);
  const done = suites.find((s) => s.status === "completed");
  const latest = done ? await get(`/evals/suites/${done.id}`) : null;
  return { suites, latest, running: suites.find((s) => MOVING.has(s.status)) || null };
}

function EvalList({ agentId }) {
  const manage = can("workspace.agents.manage");
  const agents = useAsync(() => get("/agents"), []);
  const agentList = (agents.data && agents.data.agents) || [];
  const cases = useAsync(() => get("/evals/cases", { agentId }), [agentId]);
  const history = useAsync(() => loadHistory(agentId), [agentId]);
  const [mode, setMode] = useState("retrieval_only");
  const [repeat, setRepeat] = useState("1");
  const [active, setActive] = useState(null);
  const [starting, setStarting] = useState(false);
  const [suiteError, setSuiteError] = useState(null);
  const [running, setRunning] = useState(null);

  // a suite started earlier (or elsewhere) still running: follow it
  const resumable = history.data && history.data.running;
  useEffect(() => { if (resumable && !active) setActive(resumable); }, [resumable && resumable.id]);

  const moving = !!active && MOVING.has(active.status);
  usePoll(async () => {
    const s = await get(`/evals/suites/${active.id}`, { waitMs: 2000 });
    setActive(s);
    if (!MOVING.has(s.status)) {
      cases.reload();
      history.reload();
      if (s.status === "completed") toast(`Suite finished: ${s.runSummary.pass} passed, ${s.runSummary.fail} failed, ${s.runSummary.error} errors.`);
      else toast("The suite failed to finish.", "error");
    }
  }, 200, moving);

  const runAll = async () => {
    setStarting(true);
    setSuiteError(null);
    try {
      const s = await post("/evals/cases/run", { mode, repeat: Number(repeat), agentId: agentId || undefined, wait: false });
      setActive(s);
    } catch (e) { setSuiteError(e); } finally { setStarting(false); }
  };
  const runOne = async (c) => {
    setRunning(c.id);
    try {
      const r = await post(`/evals/cases/${c.id}/runs`, { mode });
      toast(`“${c.name}”: ${r.status}. ${r.outcomeReason || ""}`, r.status === "pass" || r.status === "recorded" ? "success" : "error");
      cases.reload();
    } catch (e) { toast(e.message, "error"); } finally { setRunning(null); }
  };

  const list = (cases.data && cases.data.cases) || [];
  const summary = cases.data && cases.data.summary;
  const latest = active && active.status === "completed" && active.regressions !== undefined ? active : history.data && history.data.latest;
  const byCase = {};
  for (const r of (latest && latest.results) || []) byCase[r.caseId] = r;
  const regressed = {};
  for (const r of (latest && latest.regressions && latest.regressions.regressed) || []) regressed[r.caseId] = r;

  return html`<div class="page" data-testid="evals-page">
    <${PageHeader} title="Evals" subtitle="Answers saved from real conversations, replayed against the current agent and knowledge. Assertions say what a good answer retrieves and says; a run shows which hold." />
    ${agentList.length > 1 && html`<${Card} title="Filters"><div class="filters">
      <${Select} label="Agent" name="agentId" value=${agentId} className="field-inline" options=${[["", "All agents"], ...agentList.map((a) => [a.id, a.name])]}
        onChange=${(e) => setQuery({ agentId: e.currentTarget.value })} testid="evals-agent" />
    </div></${Card}>`}
    <${ErrorBox} error=${cases.error} retry=${cases.reload} />
    ${summary && summary.total > 0 && html`<${Tiles} s=${summary} />`}
    ${cases.data && list.length === 0
      ? html`<${Card} title="Cases"><${Empty} title="No eval cases yet">
          Save an answer from a conversation to make it a case: open a conversation (or one in the inbox) and choose “Save as eval case” under an assistant answer, then add assertions here.${" "}<a href="/app/conversations">Open conversations</a>.</${Empty}></${Card}>`
      : html`
        <${Card} title="Pass rate over time" testid="pass-rate-card">
          ${history.error ? html`<${ErrorBox} error=${history.error} retry=${history.reload} />` : !history.data ? html`<${Loading} />`
            : html`<${PassRateChart} suites=${history.data.suites} />`}
        </${Card}>
        ${manage && html`<${Card} title="Run all cases" testid="suite-card">
          <div class="row align-end ev-run-row">
            <${Select} label="Mode" name="mode" value=${mode} options=${MODES} className="field-inline" onChange=${(e) => setMode(e.currentTarget.value)} testid="suite-mode" />
            <${Select} label="Repeat each case" name="repeat" value=${repeat} className="field-inline" onChange=${(e) => setRepeat(e.currentTarget.value)} testid="suite-repeat"
              options=${[1, 2, 3, 4, 5].map((n) => [String(n), n === 1 ? "Once" : `${n} times`])} />
            <${Button} variant="primary" onClick=${runAll} busy=${starting || moving} disabled=${!list.length} testid="suite-run">${moving ? "Running…" : "Run all"}</${Button}>
          </div>
          <p class="hint">${mode === "full_assistant"
            ? "Each case asks the agent again and checks the new answer as well as what it retrieved (slower; uses the model)."
            : "Each case runs its retrieval again: answer assertions are reported as errors in this mode."}
            ${Number(repeat) > 1 ? " A case passes when most of its repeats pass; one that changes between repeats is flaky." : ""}</p>
          <${FormError} error=${suiteError} />
          ${active && html`<${SuiteStatus} s=${active} />`}
        </${Card}>`}
        <${Card} title="Cases" testid="cases-card">
          ${!cases.data ? html`<${Loading} />` : html`<${CaseTable} cases=${list} byCase=${byCase} regressed=${regressed} manage=${manage}
            running=${running} busy=${moving} runOne=${runOne} mode=${mode} />`}
        </${Card}>`}
  </div>`;
}

function Tiles({ s }) {
  const tile = (key, label, value, sub, tone) => html`<div class=${"stat ev-stat" + (tone ? " ev-stat-" + tone : "")} data-testid=${"eval-stat-" + key}>
    <div class="stat-value">${value}</div><div class="stat-label">${label}</div>${sub && html`<div class="muted small">${sub}</div>`}</div>`;
  return html`<div class="ev-tiles" data-testid="eval-summary">
    ${tile("pass-rate", "Pass rate", pct(s.passRate), s.scored ? `of ${plural(s.scored, "scored case", "scored cases")}` : "nothing scored yet", s.passRate === null || s.passRate === undefined ? null : s.passRate >= 0.8 ? "green" : s.passRate >= 0.5 ? "amber" : "red")}
    ${tile("passing", "Passing", fmtNum(s.passing), null, s.passing ? "green" : null)}
    ${tile("failing", "Failing", fmtNum(s.failing), null, s.failing ? "red" : null)}
    ${tile("error", "Error", fmtNum(s.error), null, s.error ? "red" : null)}
    ${tile("pending", "Pending", fmtNum(s.pending), "not run since saved")}
    ${tile("unscored", "Unscored", fmtNum(s.unscored), "no assertions")}
  </div>`;
}

/** The suite being run (progress) or just finished (its counts and regressions). */
function SuiteStatus({ s }) {
  const p = s.progress || {};
  const rs = s.runSummary || {};
  const reg = s.regressions || null;
  if (MOVING.has(s.status)) {
    return html`<div class="ev-suite" data-testid="suite-status" data-status=${s.status}>
      <${Progress} value=${s.status === "queued" || !p.total ? undefined : (p.done || 0) / p.total} label="Suite progress" testid="suite-progress" />
      <p class="muted small" aria-live="polite">${s.status === "queued" ? "Queued…" : `${fmtNum(p.done || 0)} of ${plural(p.total || 0, "case", "cases")} done`}</p>
    </div>`;
  }
  return html`<div class="ev-suite" data-testid="suite-result" data-status=${s.status} aria-live="polite">
    <p><${Badge} tone=${SUITE_TONE[s.status]}>${s.status}</${Badge}>
      ${" "}${rs.pass || 0} passed · ${rs.fail || 0} failed · ${rs.error || 0} errors${rs.flaky ? ` · ${rs.flaky} flaky` : ""}
      ${" "}<span class="muted">· pass rate ${pct(rs.passRate)} · ${fmtDate(s.completedAt || s.createdAt)}</span></p>
    ${s.error && html`<div class="alert alert-error" role="alert">${typeof s.error === "string" ? s.error : s.error.message || "The suite failed."}</div>`}
    ${reg && reg.regressed && reg.regressed.length > 0 && html`<div class="alert alert-error" data-testid="suite-regressions">
      <strong>${plural(reg.regressed.length, "case", "cases")} passed in the previous suite and not now:</strong>
      <ul>${reg.regressed.map((r) => html`<li><a href=${caseHref(r.caseId)}>${r.name}</a>: ${r.before} → ${r.after}${r.reason ? ` (${r.reason})` : ""}</li>`)}</ul>
    </div>`}
    ${reg && reg.fixed && reg.fixed.length > 0 && html`<p class="muted small">Fixed since the previous suite: ${reg.fixed.map((r, i) => html`${i ? ", " : ""}<a href=${caseHref(r.caseId)}>${r.name}</a>`)}</p>`}
  </div>`;
}

function CaseTable({ cases, byCase, regressed, manage, running, busy, runOne, mode }) {
  return html`<div class="table-wrap"><table class="table ev-cases">
    <caption class="sr-only">Eval cases</caption>
    <thead><tr>
      <th scope="col">Name</th><th scope="col">Question</th><th scope="col">Status</th><th scope="col">Scored</th><th scope="col">Last run</th>
      ${manage && html`<th scope="col"><span class="sr-only">Actions</span></th>`}
    </tr></thead>
    <tbody>${cases.map((c) => {
      const r = byCase[c.id];
      const reg = regressed[c.id];
      const flaky = r && r.flaky;
      return html`<tr key=${c.id} data-testid="eval-case-row" data-status=${c.status} data-flaky=${flaky ? "true" : undefined} data-regressed=${reg ? "true" : undefined}
        class=${reg ? "ev-row-regressed" : flaky ? "ev-row-flaky" : undefined}>
        <td><div class="ev-name-cell">
          <a href=${caseHref(c.id)} data-testid="eval-case-link">${c.name}</a>
          ${reg && html`<${Badge} tone="red" title=${`Passed in the previous suite (${reg.before}), ${reg.after} in the latest`} testid="case-regressed">regressed</${Badge}>`}
          ${flaky && html`<${Badge} tone="amber" title=${`${r.passes} of ${r.repeats} repeats passed in the latest suite`} testid="case-flaky">flaky</${Badge}>`}
        </div></td>
        <td class="ev-question-cell"><span class="ev-clamp">${c.question || "—"}</span></td>
        <td><${Badge} tone=${CASE_TONE[c.status]} testid="case-status">${c.status}</${Badge}></td>
        <td class="nowrap">${c.scored ? plural(c.assertions.length, "assertion", "assertions") : html`<span class="muted">No assertions</span>`}</td>
        <td class="nowrap">${c.lastRunId ? html`<a href=${caseHref(c.id, c.lastRunId)}>View<span class="sr-only"> the last run of ${c.name}</span></a>` : html`<span class="muted">Never run</span>`}</td>
        ${manage && html`<td class="num"><${Button} small onClick=${() => runOne(c)} busy=${running === c.id} disabled=${!!running || busy}
          title=${MODE_LABEL[mode]} testid="case-run-row">Run<span class="sr-only"> ${c.name}</span></${Button}></td>`}
      </tr>`;
    })}</tbody>
  </table></div>`;
}

/** The pass rate of the completed suites, oldest to newest, as a line in SVG with a table for screen readers. */
function PassRateChart({ suites }) {
  const points = suites.filter((s) => s.status === "completed" && s.runSummary && s.runSummary.passRate !== null && s.runSummary.passRate !== undefined)
    .slice(0, 30).reverse();
  if (!points.length) return html`<p class="muted" data-testid="pass-rate-empty">No suite has finished yet. Run all cases to start the history.</p>`;
  const w = 900;
  const h = 170;
  const pad = { l: 44, r: 16, t: 12, b: 26 };
  const n = points.length;
  const x = (i) => pad.l + (n === 1 ? (w - pad.l - pad.r) / 2 : (i * (w - pad.l - pad.r)) / (n - 1));
  const y = (v) => pad.t + (h - pad.t - pad.b) * (1 - v);
  const every = Math.max(1, Math.ceil(n / 6));
  const dayOf = (s) => new Date(s.createdAt).toLocaleDateString(undefined, { month: "short", day: "numeric" });
  // suites of one day are told apart by their time
  const oneDay = dayOf(points[0]) === dayOf(points[n - 1]);
  const day = (s) => (oneDay ? new Date(s.createdAt).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" }) : dayOf(s));
  const anchor = (i) => (n === 1 ? "middle" : i === 0 ? "start" : i === n - 1 ? "end" : "middle");
  const first = points[0].runSummary.passRate;
  const last = points[n - 1].runSummary.passRate;
  const label = n === 1 ? `Pass rate of the one finished suite: ${pct(last)}` : `Pass rate of the last ${n} suites, from ${pct(first)} to ${pct(last)}`;
  return html`<figure class="chart" data-testid="pass-rate-chart">
    <svg viewBox=${`0 0 ${w} ${h}`} role="img" aria-label=${label} class="chart-svg">
      ${[0, 0.5, 1].map((v) => html`<line x1=${pad.l} x2=${w - pad.r} y1=${y(v)} y2=${y(v)} class=${v === 0 ? "axis" : "grid"} />
        <text x=${pad.l - 6} y=${y(v) + 4} class="tick" text-anchor="end">${pct(v)}</text>`)}
      ${n > 1 && html`<polyline class="ev-line" points=${points.map((s, i) => `${x(i)},${y(s.runSummary.passRate)}`).join(" ")} />`}
      ${points.map((s, i) => html`<g>
        <circle cx=${x(i)} cy=${y(s.runSummary.passRate)} r="4" class="ev-point"><title>${`${fmtDate(s.createdAt)}: ${pct(s.runSummary.passRate)} (${s.runSummary.pass} passed, ${s.runSummary.fail} failed, ${s.runSummary.error} errors)`}</title></circle>
        ${(i % every === 0 || i === n - 1) && html`<text x=${x(i)} y=${h - 8} class="tick" text-anchor=${anchor(i)}>${day(s)}</text>`}
      </g>`)}
    </svg>
    <figcaption class="legend"><span class="legend-title">Pass rate of each suite</span><span class="muted">${label}.</span></figcaption>
    <table class="sr-only"><caption>Pass rate of each suite</caption>
      <thead><tr><th scope="col">Suite</th><th scope="col">Pass rate</th><th scope="col">Passed</th><th scope="col">Failed</th><th scope="col">Errors</th><th scope="col">Flaky</th></tr></thead>
      <tbody>${points.map((s) => html`<tr><th scope="row">${fmtDate(s.createdAt)}</th><td>${pct(s.runSummary.passRate)}</td>
        <td>${s.runSummary.pass}</td><td>${s.runSummary.fail}</td><td>${s.runSummary.error}</td><td>${s.runSummary.flaky}</td></tr>`)}</tbody>
    </table>
  </figure>`;
}

// ---------------------------------------------------------------- one case

/** The document choices: those the answer retrieved (from the snapshot), then the workspace's. */
function useDocuments(snapshot) {
  const res = useAsync(() => (can("workspace.documents.read") ? get("/document", { limit: 200 }).catch(() => null) : Promise.resolve(null)), []);
  const retrieved = [];
  const seen = new Set();
  for (const c of (snapshot && snapshot.originalRetrievalResult) || []) {
    if (seen.has(c.documentId)) continue;
    seen.add(c.documentId);
    retrieved.push({ id: c.documentId, title: c.title || shortId(c.documentId), rank: c.rank });
  }
  const others = ((res.data && res.data.documents) || []).filter((d) => !seen.has(d.id)).map((d) => ({ id: d.id, title: d.title || shortId(d.id) }));
  const titles = {};
  for (const d of [...others, ...retrieved]) titles[d.id] = d.title;
  return { retrieved, others, titles, more: !!(res.data && res.data.hasMore) };
}

function CaseDetail({ id, runId }) {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => get(`/evals/cases/${encodeURIComponent(id)}`), [id]);
  const c = res.data;
  const snap = useAsync(() => (c ? get(`/evals/snapshots/${c.snapshotId}`) : Promise.resolve(null)), [c && c.snapshotId]);
  const runs = useAsync(() => get(`/evals/cases/${encodeURIComponent(id)}/runs`, { limit: 50 }), [id]);
  const docs = useDocuments(snap.data);
  const [mode, setMode] = useState("retrieval_only");
  const [running, setRunning] = useState(false);
  const [runError, setRunError] = useState(null);
  const [dirty, setDirty] = useState(false);

  if (res.error) {
    return html`<div class="page"><${PageHeader} title="Eval case" back=${["/app/evals", "Evals"]} /><${ErrorBox} error=${res.error} retry=${res.reload} /></div>`;
  }
  if (!c) return html`<${Loading} />`;
  const list = (runs.data && runs.data.runs) || [];
  const selected = runId || (list[0] && list[0].id) || null;
  const needsAnswer = c.assertions.some((a) => NEEDS_ANSWER.has(a.type));

  const run = async () => {
    setRunning(true);
    setRunError(null);
    try {
      const r = await post(`/evals/cases/${c.id}/runs`, { mode });
      runs.setData((d) => ({ ...(d || {}), runs: [r, ...((d && d.runs) || []).filter((x) => x.id !== r.id)] }));
      setQuery({ run: r.id });
      res.reload();
      runs.reload();
    } catch (e) { setRunError(e); } finally { setRunning(false); }
  };
  const remove = async () => {
    if (!(await confirm({
      title: `Delete the case “${c.name}”?`,
      message: "The case, its assertions and its runs are deleted. The conversation it was saved from stays.",
      confirmLabel: "Delete case",
      danger: true,
    }))) return;
    try {
      await del(`/evals/cases/${c.id}`);
      toast(`Case “${c.name}” deleted.`);
      navigate("/app/evals");
    } catch (e) { toast(e.message, "error"); }
  };

  return html`<div class="page" data-testid="eval-case" data-status=${c.status}>
    <${PageHeader} title=${c.name} back=${["/app/evals", "Evals"]}
      subtitle=${html`<${Badge} tone=${CASE_TONE[c.status]} testid="case-status">${c.status}</${Badge}>
        <span class="muted"> ${c.scored ? plural(c.assertions.length, "assertion", "assertions") : "No assertions yet: runs are recorded, not scored"} · saved ${fmtDate(c.createdAt)}</span>`}
      actions=${manage && html`<${Button} variant="danger" small onClick=${remove} testid="case-delete">Delete case</${Button}>`} />
    ${c.question && c.question !== c.name && html`<p class="ev-question" data-testid="case-question"><span class="muted">Question: </span>${c.question}</p>`}
    ${manage
      ? html`<${CaseEditor} key=${c.id + ":" + c.updatedAt} c=${c} docs=${docs} onSaved=${(x) => { res.setData(x); }} onDirty=${setDirty} />`
      : html`<${Card} title="Assertions"><${AssertionList} assertions=${c.assertions} docs=${docs} /></${Card}>`}
    ${manage && html`<${Card} title="Run this case" testid="case-run-card">
      <div class="row align-end ev-run-row">
        <${Select} label="Mode" name="mode" value=${mode} options=${MODES} className="field-inline" onChange=${(e) => setMode(e.currentTarget.value)} testid="case-run-mode" />
        <${Button} variant="primary" onClick=${run} busy=${running} disabled=${dirty} testid="case-run">Run</${Button}>
      </div>
      <p class="hint">${dirty ? "Save your changes first: a run uses the saved assertions."
        : mode === "retrieval_only" && needsAnswer ? "Answer assertions need an answer: in this mode they are reported as errors. Choose Full assistant to score them."
          : mode === "full_assistant" ? "The agent answers the question again with its current published revision and knowledge." : "Only the retrieval runs again, with the agent's current settings and knowledge."}</p>
      <${FormError} error=${runError} />
    </${Card}>`}
    <div class="ev-detail-grid">
      <${Card} title="Runs" testid="case-runs">
        ${runs.error ? html`<${ErrorBox} error=${runs.error} retry=${runs.reload} />` : !runs.data ? html`<${Loading} />`
          : list.length === 0 ? html`<p class="muted">Not run yet.${manage ? " Run it above to see what it retrieves now." : ""}</p>`
            : html`<ol class="ev-runs">${list.map((r) => html`<li key=${r.id}>
                <a href=${caseHref(c.id, r.id)} class=${"ev-run-link" + (r.id === selected ? " active" : "")} aria-current=${r.id === selected ? "true" : undefined} data-testid="case-run-item" data-status=${r.status}>
                  <${Badge} tone=${RUN_TONE[r.status]}>${r.status}</${Badge}>
                  <span class="ev-run-when">${fmtDate(r.startedAt)}</span>
                  <span class="muted small">${MODE_LABEL[r.mode] || r.mode}${r.suiteId ? " · suite" : ""}</span>
                </a></li>`)}</ol>`}
      </${Card}>
      <${RunView} key=${selected || "none"} caseId=${c.id} runId=${selected} runs=${list} docs=${docs} />
    </div>
    <${Snapshot} res=${snap} />
  </div>`;
}

// ---------------------------------------------------------------- assertions

let rowSeq = 0;

/** An editable row from an assertion (or a new one). */
function toRow(a = {}) {
  return {
    key: ++rowSeq,
    type: a.type || TYPES[0][0],
    documentId: a.documentId || "",
    k: a.k === undefined || a.k === null ? "3" : String(a.k),
    documentIds: a.documentIds && a.documentIds.length ? [...a.documentIds] : [""],
    metadata: a.metadata ? JSON.stringify(a.metadata, null, 2) : "",
    pattern: a.pattern || "",
    matchMode: a.matchMode || "substring",
    caseSensitive: !!a.caseSensitive,
    expectedAnswer: a.expectedAnswer || "",
    criteria: a.criteria || "",
  };
}

function localError(i, field, message) {
  const f = `assertions[${i}].${field}`;
  return new ApiError(400, "invalid_request", message, { field: f, index: i });
}

/** The assertion a row stands for (only the fields of its type); a malformed metadata object throws. */
function toAssertion(r, i) {
  const t = r.type;
  switch (t) {
    case "retrieval_includes_document":
    case "retrieval_excludes_document":
    case "answer_cites_document":
      return { type: t, documentId: r.documentId };
    case "retrieval_top_k_includes_document": {
      const a = { type: t, documentId: r.documentId };
      if (String(r.k).trim() !== "") a.k = Number(r.k);
      return a;
    }
    case "retrieval_document_order":
      return { type: t, documentIds: r.documentIds };
    case "retrieval_chunk_metadata": {
      let m;
      try { m = JSON.parse(r.metadata.trim() || "null"); } catch { m = undefined; }
      if (!m || typeof m !== "object" || Array.isArray(m)) {
        throw localError(i, "metadata", "Write the metadata as a JSON object, such as {\"topic\": \"shipping\"}.");
      }
      return { type: t, documentId: r.documentId, metadata: m };
    }
    case "answer_contains":
    case "answer_does_not_contain":
      return { type: t, pattern: r.pattern, matchMode: r.matchMode, caseSensitive: !!r.caseSensitive };
    default: {
      const a = { type: t, expectedAnswer: r.expectedAnswer };
      if (r.criteria.trim()) a.criteria = r.criteria;
      return a;
    }
  }
}

const rowSignature = (rows) => JSON.stringify(rows.map(({ key, ...r }) => r));

function CaseEditor({ c, docs, onSaved, onDirty }) {
  const [name, setName] = useState(c.name);
  const [rows, setRows] = useState(() => c.assertions.map(toRow));
  const [base] = useState(() => rowSignature(c.assertions.map(toRow)));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const nameId = useId("case-name");
  const dirty = name !== c.name || rowSignature(rows) !== base;
  useEffect(() => { onDirty(dirty); }, [dirty]);
  useEffect(() => () => onDirty(false), []);

  const update = (i, changes) => setRows((rs) => rs.map((r, j) => (j === i ? { ...r, ...changes } : r)));
  const add = () => setRows((rs) => (rs.length >= MAX_ASSERTIONS ? rs : [...rs, toRow()]));
  const remove = (i) => {
    setRows((rs) => rs.filter((_, j) => j !== i));
    // an error about a row that moved no longer names the right one
    setError(null);
  };
  const save = async (e) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const assertions = rows.map(toAssertion);
      const body = { assertions };
      if (name !== c.name) body.name = name.trim();
      const saved = await patch(`/evals/cases/${c.id}`, body);
      toast(rows.length ? `Saved ${plural(rows.length, "assertion", "assertions")}. Run the case to score them.` : "Saved.");
      onSaved(saved);
    } catch (err) { setError(err); } finally { setBusy(false); }
  };
  const rowIndex = error && error.field ? /^assertions\[(\d+)\]/.exec(error.field) : null;
  const listError = error && error.field === "assertions" ? error.message : null;
  const shownElsewhere = namesField(error, "name") || !!rowIndex || !!listError;

  return html`<form onSubmit=${save} novalidate data-testid="case-editor" data-dirty=${dirty ? "true" : "false"}>
    <${Card} title="Case and assertions" className="ev-editor">
      <${Field} label="Name" id=${nameId} error=${namesField(error, "name") ? error.message : null} className="ev-name">
        <input id=${nameId} type="text" value=${name} maxlength="200" onInput=${(e) => setName(e.currentTarget.value)} data-testid="case-name"
          aria-invalid=${namesField(error, "name") ? "true" : undefined} aria-describedby=${namesField(error, "name") ? nameId + "-err" : undefined} />
      </${Field}>
      <div class="ev-assertions-head">
        <h3 id=${nameId + "-list"}>Assertions <span class="muted small">${rows.length} of ${MAX_ASSERTIONS}</span></h3>
        <p class="hint">Each run checks every assertion against what the replay retrieved${rows.some((r) => NEEDS_ANSWER.has(r.type)) ? " and answered" : ""}. Documents retrieved for the saved answer are listed first.</p>
      </div>
      ${listError && html`<p class="field-error" role="alert" data-testid="assertions-error">${listError}</p>`}
      ${rows.length === 0 && html`<p class="muted" data-testid="assertions-empty">No assertions: a run is recorded but not scored. Add what a good answer must retrieve or say.</p>`}
      ${rows.length > 0 && html`<ol class="ev-assertions" aria-labelledby=${nameId + "-list"}>
        ${rows.map((r, i) => html`<li key=${r.key}><${AssertionRow} r=${r} i=${i} docs=${docs}
          error=${rowIndex && Number(rowIndex[1]) === i ? error : null} update=${update} remove=${remove} /></li>`)}
      </ol>`}
      <div class="row ev-editor-actions">
        <${Button} onClick=${add} disabled=${rows.length >= MAX_ASSERTIONS} testid="assertion-add">Add assertion</${Button}>
        ${rows.length >= MAX_ASSERTIONS && html`<span class="muted small">A case has at most ${MAX_ASSERTIONS} assertions.</span>`}
        <span class="spacer"></span>
        ${dirty && html`<span class="ev-dirty" data-testid="case-dirty">Unsaved changes</span>`}
        <${Button} type="submit" variant="primary" busy=${busy} disabled=${!dirty} testid="case-save">Save</${Button}>
      </div>
      ${error && !shownElsewhere && html`<${FormError} error=${error} />`}
    </${Card}>
  </form>`;
}

function AssertionRow({ r, i, docs, error, update, remove }) {
  const n = i + 1;
  const f = (name) => {
    if (!error) return null;
    const full = `assertions[${i}].${name}`;
    return namesField(error, full) ? error.message : null;
  };
  const shown = (FIELDS[r.type] || []).some((x) => f(x));
  const rowError = error && !shown ? error.message : null;
  const set = (k) => (e) => update(i, { [k]: e.currentTarget.value });
  const doc = (label = "Document") => html`<${DocSelect} label=${label} value=${r.documentId} docs=${docs} error=${f("documentId")}
    onChange=${(v) => update(i, { documentId: v })} testid="assertion-document" />`;
  let fields;
  switch (r.type) {
    case "retrieval_top_k_includes_document":
      fields = html`${doc()}
        <${Input} label="k (top results)" type="number" min="1" max="100" step="1" inputmode="numeric" value=${r.k} onInput=${set("k")}
          error=${f("k")} hint="1 to 100" testid="assertion-k" className="ev-k" />`;
      break;
    case "retrieval_document_order":
      fields = html`<${OrderList} r=${r} i=${i} docs=${docs} error=${error} update=${update} />`;
      break;
    case "retrieval_chunk_metadata":
      fields = html`${doc()}
        <${TextArea} label="Metadata a chunk of it has" rows="3" value=${r.metadata} onInput=${set("metadata")} error=${f("metadata")} spellcheck="false"
          placeholder=${'{"topic": "shipping"}'} hint="A JSON object; values are text, numbers, true/false or null." testid="assertion-metadata" className="ev-wide" />`;
      break;
    case "answer_contains":
    case "answer_does_not_contain":
      fields = html`<${Input} label=${r.type === "answer_contains" ? "Text the answer contains" : "Text the answer must not contain"} value=${r.pattern}
          onInput=${set("pattern")} maxlength="4000" error=${f("pattern")} testid="assertion-pattern" className="ev-wide" spellcheck="false" />
        <${Select} label="Match" value=${r.matchMode} options=${[["substring", "Text"], ["regex", "Regular expression"]]} error=${f("matchMode")}
          onChange=${set("matchMode")} testid="assertion-match-mode" />
        <div class="ev-check"><${Checkbox} label="Case-sensitive" checked=${r.caseSensitive} onChange=${(v) => update(i, { caseSensitive: v })} testid="assertion-case-sensitive" /></div>`;
      break;
    case "llm_judge":
      fields = html`<${TextArea} label="Expected answer" rows="3" value=${r.expectedAnswer} onInput=${set("expectedAnswer")} maxlength="8000"
          error=${f("expectedAnswer")} hint="What a good answer says; the judge compares the new answer with it." testid="assertion-expected" className="ev-wide" />
        <${TextArea} label="Criteria (optional)" rows="2" value=${r.criteria} onInput=${set("criteria")} maxlength="2000" error=${f("criteria")}
          hint="What matters most, such as “mentions the 30-day limit”." testid="assertion-criteria" className="ev-wide" />`;
      break;
    default:
      fields = doc(r.type === "answer_cites_document" ? "Cited document" : "Document");
  }
  return html`<fieldset class=${"ev-assertion" + (error ? " ev-assertion-bad" : "")} data-testid="assertion-row" data-index=${i} data-type=${r.type}>
    <legend>Assertion ${n}</legend>
    <div class="ev-assertion-grid">
      <${Select} label="Type" value=${r.type} options=${TYPES} error=${f("type")} onChange=${(e) => update(i, { type: e.currentTarget.value })} testid="assertion-type" className="ev-type" />
      ${fields}
    </div>
    ${NEEDS_ANSWER.has(r.type) && html`<p class="hint">Scored in Full assistant runs only.</p>`}
    ${rowError && html`<p class="field-error" role="alert" data-testid="assertion-error">${rowError}</p>`}
    <div class="ev-assertion-remove">
      <${Button} small variant="ghost" onClick=${() => remove(i)} testid="assertion-remove">Remove<span class="sr-only"> assertion ${n}</span></${Button}>
    </div>
  </fieldset>`;
}

function OrderList({ r, i, docs, error, update }) {
  const ids = r.documentIds;
  const err = (j) => (error && namesField(error, `assertions[${i}].documentIds[${j}]`) ? error.message : null);
  const listErr = error && error.field === `assertions[${i}].documentIds` ? error.message : null;
  const set = (list) => update(i, { documentIds: list });
  const move = (j, d) => {
    const l = [...ids];
    const [x] = l.splice(j, 1);
    l.splice(j + d, 0, x);
    set(l);
  };
  return html`<div class="ev-order ev-wide">
    <p class="label-like">Documents, in the order they must rank</p>
    <ol class="ev-order-list">${ids.map((d, j) => html`<li key=${j}>
      <${DocSelect} label=${`Position ${j + 1}`} value=${d} docs=${docs} error=${err(j)} onChange=${(v) => set(ids.map((x, k) => (k === j ? v : x)))} testid="assertion-order-document" />
      <div class="row ev-order-actions">
        <${Button} small variant="ghost" disabled=${j === 0} onClick=${() => move(j, -1)}>Up<span class="sr-only"> position ${j + 1}</span></${Button}>
        <${Button} small variant="ghost" disabled=${j === ids.length - 1} onClick=${() => move(j, 1)}>Down<span class="sr-only"> position ${j + 1}</span></${Button}>
        <${Button} small variant="ghost" disabled=${ids.length === 1} onClick=${() => set(ids.filter((_, k) => k !== j))}>Remove<span class="sr-only"> position ${j + 1}</span></${Button}>
      </div>
    </li>`)}</ol>
    ${listErr && html`<p class="field-error" role="alert" data-testid="field-error">${listErr}</p>`}
    <${Button} small onClick=${() => set([...ids, ""])} disabled=${ids.length >= MAX_ORDER}>Add a document</${Button}>
  </div>`;
}

/** A document picker: the documents the saved answer retrieved, then the workspace's others. */
function DocSelect({ label, value, docs, error, onChange, testid }) {
  const id = useId("doc");
  const known = docs.retrieved.some((d) => d.id === value) || docs.others.some((d) => d.id === value);
  return html`<${Field} label=${label} id=${id} error=${error} hint=${docs.more ? "Showing the newest 200 documents after the retrieved ones." : undefined} className="ev-doc">
    <select id=${id} value=${value} onChange=${(e) => onChange(e.currentTarget.value)} data-testid=${testid}
      aria-invalid=${error ? "true" : undefined} aria-describedby=${[error && id + "-err", docs.more && id + "-hint"].filter(Boolean).join(" ") || undefined}>
      <option value="">Choose a document</option>
      ${value && !known && html`<option value=${value}>${value}</option>`}
      ${docs.retrieved.length > 0 && html`<optgroup label="Retrieved for the saved answer">
        ${docs.retrieved.map((d) => html`<option value=${d.id}>${`#${d.rank} ${d.title}`}</option>`)}</optgroup>`}
      ${docs.others.length > 0 && html`<optgroup label="Other documents">${docs.others.map((d) => html`<option value=${d.id}>${d.title}</option>`)}</optgroup>`}
    </select>
  </${Field}>`;
}

/** One assertion in words. */
function describe(a, titles) {
  const doc = (d) => (titles[d] ? `“${titles[d]}”` : `document …${shortId(d)}`);
  switch (a.type) {
    case "retrieval_includes_document": return `Retrieval includes ${doc(a.documentId)}`;
    case "retrieval_excludes_document": return `Retrieval excludes ${doc(a.documentId)}`;
    case "retrieval_top_k_includes_document": return `${doc(a.documentId)} is in the top ${a.k}`;
    case "retrieval_document_order": return `Retrieved in this order: ${(a.documentIds || []).map(doc).join(", ")}`;
    case "retrieval_chunk_metadata": return `A chunk of ${doc(a.documentId)} has ${JSON.stringify(a.metadata)}`;
    case "answer_cites_document": return `The answer cites ${doc(a.documentId)}`;
    case "answer_contains":
    case "answer_does_not_contain":
      return `The answer ${a.type === "answer_contains" ? "contains" : "does not contain"} ${a.matchMode === "regex" ? "a match of /" + a.pattern + "/" : "“" + a.pattern + "”"}${a.caseSensitive ? " (case-sensitive)" : ""}`;
    case "llm_judge": return `A model judges the answer against: “${a.expectedAnswer}”${a.criteria ? ` (criteria: ${a.criteria})` : ""}`;
    default: return TYPE_LABEL[a.type] || a.type;
  }
}

function AssertionList({ assertions, docs }) {
  if (!assertions.length) return html`<p class="muted">No assertions yet.</p>`;
  return html`<ol class="ev-readonly">${assertions.map((a) => html`<li data-testid="assertion-item">${describe(a, docs.titles)}</li>`)}</ol>`;
}

// ---------------------------------------------------------------- runs

function RunView({ runId, runs, docs }) {
  const inList = runs.find((r) => r.id === runId);
  const res = useAsync(() => (!runId || inList ? Promise.resolve(null) : get(`/evals/runs/${encodeURIComponent(runId)}`)), [runId, !!inList]);
  const r = inList || res.data;
  if (!runId) return html`<${Card} title="Run"><p class="muted">Choose a run to see its verdicts and what it retrieved.</p></${Card}>`;
  if (res.error) return html`<${Card} title="Run"><${ErrorBox} error=${res.error} retry=${res.reload} /></${Card}>`;
  if (!r) return html`<${Card} title="Run"><${Loading} /></${Card}>`;
  const cfg = r.resolvedConfig || {};
  const out = r.observedOutput || {};
  const chunks = out.retrievedChunks || [];
  const verdicts = r.assertionVerdicts || [];
  const titles = { ...docs.titles };
  for (const ch of chunks) if (ch.title) titles[ch.documentId] = ch.title;
  const revision = cfg.source ? `${cfg.source}${cfg.revisionVersion ? " · v" + cfg.revisionVersion : ""}` : "—";
  return html`<${Card} title=${`Run of ${fmtDate(r.startedAt)}`} testid="run-detail" className="ev-run" >
    <div data-status=${r.status} data-testid="run-summary" class="ev-run-summary">
      <${Badge} tone=${RUN_TONE[r.status]} testid="run-status">${r.status}</${Badge}>
      <span data-testid="run-reason">${r.outcomeReason || ""}</span>
    </div>
    <${Meta} items=${[
      ["Mode", MODE_LABEL[r.mode] || r.mode],
      ["Agent revision", revision],
      cfg.modelId && ["Model", `${cfg.modelProvider ? cfg.modelProvider + " / " : ""}${cfg.modelId}`],
      ["Took", took(r.startedAt, r.completedAt)],
    ]} />
    ${out.error && html`<div class="alert alert-error" role="alert" data-testid="run-error"><strong>The replay failed.</strong> ${out.error.message}${out.error.code ? ` (${out.error.code})` : ""}</div>`}
    <h3 class="ev-h3">Verdicts</h3>
    ${verdicts.length === 0 ? html`<p class="muted">No assertions were checked: the run is recorded only.</p>`
      : html`<ol class="ev-verdicts">${verdicts.map((v) => html`<li class=${"ev-verdict ev-verdict-" + v.status} data-testid="run-verdict" data-status=${v.status}>
          <div class="ev-verdict-head"><${Badge} tone=${RUN_TONE[v.status]}>${v.status}</${Badge}> <span class="ev-verdict-what">${describe(v.assertion || {}, titles)}</span></div>
          ${v.reason && html`<p class="ev-verdict-reason" data-testid="verdict-reason">${v.reason}</p>`}
          ${v.judge && html`<p class="muted small" data-testid="verdict-judge">Judged by ${v.judge.judgeModel || "the workspace model"}${v.judge.promptHash ? html` · prompt <span class="mono">${String(v.judge.promptHash).slice(0, 12)}</span>` : ""}</p>`}
        </li>`)}</ol>`}
    ${typeof out.answer === "string" && html`<h3 class="ev-h3">Answer</h3><p class="msg-text ev-answer" data-testid="run-answer">${out.answer}</p>`}
    <h3 class="ev-h3">Retrieved chunks <span class="muted small">${fmtNum(chunks.length)}</span></h3>
    ${chunks.length === 0 ? html`<p class="muted">Nothing was retrieved.</p>` : html`<${ChunkTable} rows=${chunks} caption="Chunks the run retrieved" rowTestId="run-chunk" />`}
  </${Card}>`;
}

function ChunkTable({ rows, caption, rowTestId }) {
  return html`<div class="table-wrap"><table class="table ev-chunks">
    <caption class="sr-only">${caption}</caption>
    <thead><tr><th scope="col" class="num">Rank</th><th scope="col">Title</th><th scope="col">Document id</th><th scope="col" class="num">Similarity</th></tr></thead>
    <tbody>${rows.map((ch, i) => html`<tr key=${ch.chunkId || i} data-testid=${rowTestId} data-document=${ch.documentId}>
      <td class="num">${ch.rank}</td>
      <td><a href=${`/app/documents/${ch.documentId}${ch.chunkId ? "?chunk=" + encodeURIComponent(ch.chunkId) : ""}`}>${ch.title || "Untitled"}</a></td>
      <td><span class="mono small">${ch.documentId}</span></td>
      <td class="num">${ch.similarity === null || ch.similarity === undefined ? "—" : Number(ch.similarity).toFixed(3)}</td>
    </tr>`)}</tbody>
  </table></div>`;
}

// ---------------------------------------------------------------- the frozen conversation

function Snapshot({ res }) {
  const s = res.data;
  if (res.error) return html`<${Card} title="Saved conversation"><${ErrorBox} error=${res.error} retry=${res.reload} /></${Card}>`;
  if (!s) return html`<${Card} title="Saved conversation"><${Loading} /></${Card}>`;
  const retrieved = s.originalRetrievalResult || [];
  return html`<${Card} title="Saved conversation" testid="case-snapshot"
    actions=${s.sourceConversationId && html`<a class="btn btn-small" href=${"/app/conversations/" + s.sourceConversationId}>Open the conversation</a>`}>
    <p class="muted small">Frozen ${fmtDate(s.capturedAt)} ·
      ${" "}<${Badge} tone=${s.fidelity === "full" ? "green" : "amber"} title=${s.fidelity === "full" ? "The instructions, model, retrieval settings and result were kept" : "Only the messages were kept"}>${s.fidelity === "full" ? "full" : "messages only"}</${Badge}>
      ${s.originalModelId && html` · answered by <span class="mono">${s.originalModelId}</span>`}
      ${s.originalAgent && s.originalAgent.version && html` · agent revision v${s.originalAgent.version}`}</p>
    <div class="transcript ev-transcript" role="log" aria-label="Saved messages">
      ${(s.messages || []).map((m) => {
        const saved = m.id === s.sourceMessageId;
        return html`<div class=${"msg " + (m.role === "user" ? "msg-user" : "msg-assistant") + (saved ? " ev-saved-answer" : "")} data-testid="snapshot-message" data-role=${m.role}>
          <span class="msg-who">${m.role === "user" ? "Visitor" : "Assistant"}${saved ? " · the saved answer" : ""}</span>
          <p class="msg-text">${m.content}</p>
          ${m.citations && m.citations.length > 0 && html`<ol class="citations">${m.citations.map((x) => html`<li><a href=${`/app/documents/${x.documentId}${x.chunkId ? "?chunk=" + encodeURIComponent(x.chunkId) : ""}`}>${x.title || shortId(x.documentId)}</a></li>`)}</ol>`}
          <span class="muted small">${fmtDate(m.createdAt)}</span>
        </div>`;
      })}
    </div>
    ${s.fidelity === "full" && html`<h3 class="ev-h3">Retrieved for the saved answer <span class="muted small">${fmtNum(retrieved.length)}</span></h3>
      ${retrieved.length ? html`<${ChunkTable} rows=${retrieved} caption="Chunks retrieved for the saved answer" rowTestId="snapshot-chunk" />` : html`<p class="muted">Nothing was retrieved for it.</p>`}`}
  </${Card}>`;
}
