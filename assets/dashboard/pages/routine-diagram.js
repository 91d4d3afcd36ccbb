// A routine drawn from its structured definition: steps as boxes top to bottom in ordinal order,
// terminals as rounded boxes in a column on the right, transitions as arrows with a short label
// (the guard). An edge to the next step runs straight down; an edge to a terminal runs straight
// right to a copy of the terminal level with its step (no long lines across the drawing); any
// other edge between steps (a skip ahead, or a loop back to an earlier step) curves on the left,
// each in its own lane, labelled where it leaves. Plain SVG built with Preact elements; every text
// is a text node. Below it the same transitions as a table, for screen readers and for reading.

import { html, useId } from "../ui.js";

const PAD = 16;
const BOX_W = 280;
const BASE_H = 54;
const ROW_GAP = 52;
const START_H = 38;
const TERM_W = 210;
const TERM_H = 42;
const TERM_GAP = 8;
const GAP_R = 215;
const LANE0 = 34;
const LANE_STEP = 24;
const SIDE_CHARS = 26;

const OPS = {
  equals: "=", not_equals: "≠", in: "in", gt: ">", gte: "≥", lt: "<", lte: "≤",
  is_true: "is true", is_false: "is false", is_present: "is present", is_absent: "is absent",
  older_than: "older than", within: "within",
};

/** Clips `s` to `n` characters with an ellipsis. */
export function clip(s, n) {
  const t = String(s ?? "");
  return t.length > n ? t.slice(0, Math.max(1, n - 1)).trimEnd() + "…" : t;
}

/** `{{slot.x}}` written as `@x`, whitespace collapsed. */
export function prose(s) {
  return String(s ?? "").replace(/\{\{\s*slot\.([A-Za-z0-9_]+)\s*\}\}/g, "@$1").replace(/\s+/g, " ").trim();
}

function value(v) {
  if (Array.isArray(v)) return v.map(value).join(", ");
  if (v === null || v === undefined) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The approval option an edge follows, or null. */
function optionOf(t, from) {
  if (!from || from.kind !== "approval" || !from.captureKey || t.guardKind !== "field" || t.fieldOp !== "equals") return null;
  if (t.fieldRef !== from.captureKey + ".id" && t.fieldRef !== from.captureKey) return null;
  const o = (from.options || []).find((x) => x.id === t.fieldValue);
  return o || { id: value(t.fieldValue), label: value(t.fieldValue) };
}

/** A transition's guard in a few words: `default`, `“prose”`, `amount < 50`, `max 2`, `option: Approve`. */
export function guardLabel(t, from) {
  const o = optionOf(t, from);
  if (o) return `option: ${o.label}`;
  switch (t.guardKind) {
    case "default": return "default";
    case "llm": return t.guardText ? `“${prose(t.guardText)}”` : "llm (the model decides)";
    case "outcome": return `outcome ${t.outcomeStatus ?? "?"}`;
    case "counter": return `max ${t.counterLimit ?? "?"}`;
    case "slot_filled": {
      const keys = [...String(t.guardText || "").matchAll(/slot\.([A-Za-z0-9_]+)/g)].map((m) => m[1]);
      return `filled ${keys.join(", ") || prose(t.guardText)}`;
    }
    case "field": {
      const op = OPS[t.fieldOp] || t.fieldOp || "?";
      const v = t.fieldOp === "in" ? value(t.fieldValues ?? t.fieldValue) : value(t.fieldValue);
      const unit = t.fieldUnit ? " " + t.fieldUnit : "";
      return `${t.fieldRef ?? "?"} ${op}${v !== "" ? " " + v : ""}${unit}`;
    }
    default: return t.guardKind || "?";
  }
}

/** What kind of guard it is, in words (for the text list). */
function guardKindText(t, from) {
  if (optionOf(t, from)) return "approval option";
  return {
    default: "otherwise (default)", llm: "the model judges", field: "field", outcome: "tool outcome",
    counter: "loop limit", slot_filled: "slots filled",
  }[t.guardKind] || t.guardKind;
}

function stepTitle(s) {
  return (s.metadata && s.metadata.outlineLabel) || s.stableStepId;
}

function stepDetail(s) {
  if (s.kind === "tool") return `#${s.toolRef || "?"}${s.instruction && s.instruction !== stepTitle(s) ? " · " + prose(s.instruction) : ""}`;
  if (s.kind === "action") return `[action ${s.actionType || "?"}]`;
  if (s.kind === "approval") return (s.options || []).map((o) => o.label).join(" / ") || `captures ${s.captureKey}`;
  return prose(s.instruction);
}

function nodeName(id, steps, terminals) {
  const s = steps.find((x) => x.stableStepId === id);
  if (s) return `${stepTitle(s)} (${s.kind} step)`;
  const t = terminals.find((x) => x.stableStepId === id);
  if (t) return `${t.stableStepId} (${t.kind === "handoff" ? "hand off to a person" : "complete"})`;
  return `${id} (unknown)`;
}

/** Lays the graph out: positions of steps and terminals, and a path and label place for every edge. */
export function layout(def) {
  const steps = [...(def.steps || [])].sort((a, b) => a.ordinal - b.ordinal);
  const terminals = [...(def.terminals || [])].sort((a, b) => a.ordinal - b.ordinal);
  const index = new Map(steps.map((s, i) => [s.stableStepId, i]));
  const termById = new Map(terminals.map((t) => [t.stableStepId, t]));
  const transitions = [...(def.transitions || [])]
    .filter((t) => index.has(t.fromStep) && (index.has(t.toRef) || termById.has(t.toRef)))
    .sort((a, b) => index.get(a.fromStep) - index.get(b.fromStep) || a.ordinal - b.ordinal);

  // classify: down (to the next step), right (to a terminal), side (any other step: lanes on the left)
  const edges = transitions.map((t) => {
    const i = index.get(t.fromStep);
    const from = steps[i];
    const e = { t, from, i, label: guardLabel(t, from), option: !!optionOf(t, from) };
    if (termById.has(t.toRef)) e.kind = "right";
    else {
      e.j = index.get(t.toRef);
      e.kind = e.j === i + 1 ? "down" : "side";
      e.back = e.j <= i;
    }
    return e;
  });

  // lanes for side edges: shorter spans nearer the boxes
  const side = edges.filter((e) => e.kind === "side")
    .sort((a, b) => Math.abs(a.j - a.i) - Math.abs(b.j - b.i) || Math.min(a.i, a.j) - Math.min(b.i, b.j));
  const lanes = [];
  for (const e of side) {
    const lo = Math.min(e.i, e.j);
    const hi = Math.max(e.i, e.j);
    let k = 0;
    while (lanes[k] && lanes[k].some(([a, b]) => !(hi < a || lo > b))) k++;
    (lanes[k] = lanes[k] || []).push([lo, hi]);
    e.lane = k;
  }

  // ports per step: terminal exits on the right, side edges (out and in) on the left
  const ports = steps.map(() => ({ right: [], left: [], down: [] }));
  for (const e of edges) {
    if (e.kind === "right") ports[e.i].right.push(e);
    else if (e.kind === "down") ports[e.i].down.push(e);
    else {
      ports[e.i].left.push({ e, end: "from" });
      ports[e.j].left.push({ e, end: "to" });
    }
  }

  // the left margin holds the lanes and the side edges' labels (written beside their source)
  const sideLabel = Math.max(0, ...side.map((e) => clip(e.label, SIDE_CHARS).length * 6.4 + 14));
  const laneRoom = side.length ? LANE0 + (lanes.length - 1) * LANE_STEP + 12 : 0;
  const left = PAD + Math.max(sideLabel, laneRoom);
  const stack = (n) => (n ? n * (TERM_H + TERM_GAP) - TERM_GAP : 0);
  const boxes = [];
  let y = PAD + START_H;
  steps.forEach((s, i) => {
    const p = ports[i];
    const h = Math.max(BASE_H, stack(p.right.length), (p.left.length + 1) * 20);
    boxes.push({ s, x: left, y, w: BOX_W, h });
    y += h + ROW_GAP;
  });

  // each exit to a terminal ends at its own copy of the terminal, level with the step: a short
  // straight arrow instead of long curves across the drawing (the first copy is "the" terminal)
  const tx = left + BOX_W + GAP_R;
  const chips = [];
  const seen = new Set();
  for (let i = 0; i < steps.length; i++) {
    const b = boxes[i];
    const p = ports[i];
    const top = b.y + (b.h - stack(p.right.length)) / 2;
    p.right.forEach((e, k) => {
      const cy = top + k * (TERM_H + TERM_GAP) + TERM_H / 2;
      const t = termById.get(e.t.toRef);
      chips.push({ t, x: tx, y: cy - TERM_H / 2, w: TERM_W, h: TERM_H, first: !seen.has(t.stableStepId) });
      seen.add(t.stableStepId);
      e.path = `M${b.x + b.w},${cy} L${tx - 1},${cy}`;
      e.lx = b.x + b.w + 8;
      e.ly = cy - 6;
      e.anchor = "start";
    });
  }
  // terminals nothing leads to: below the last step
  for (const t of terminals) {
    if (seen.has(t.stableStepId)) continue;
    chips.push({ t, x: tx, y, w: TERM_W, h: TERM_H, first: true, orphan: true });
    y += TERM_H + ROW_GAP;
  }

  for (let i = 0; i < steps.length; i++) {
    const b = boxes[i];
    const p = ports[i];
    p.down.forEach((e, k) => {
      const n = p.down.length;
      const x = b.x + b.w / 2 + (k - (n - 1) / 2) * 56;
      const to = boxes[e.j];
      e.path = `M${x},${b.y + b.h} L${x},${to.y - 1}`;
      e.lx = n > 1 && k < n / 2 ? x - 6 : x + 6;
      e.ly = b.y + b.h + ROW_GAP / 2 + 4;
      e.anchor = n > 1 && k < n / 2 ? "end" : "start";
    });
    // outgoing side edges first (their labels sit by them), ordered so nearer targets leave lower
    const outs = p.left.filter((x) => x.end === "from");
    const ins = p.left.filter((x) => x.end === "to");
    [...outs, ...ins].forEach((port, k) => {
      const py = b.y + (b.h * (k + 1)) / (p.left.length + 1);
      if (port.end === "from") port.e.y0 = py;
      else port.e.y1 = py;
    });
  }
  for (const e of side) {
    const d = LANE0 + e.lane * LANE_STEP;
    const cx = left - d / 0.75;
    e.path = `M${left},${e.y0} C${cx},${e.y0} ${cx},${e.y1} ${left + 1},${e.y1}`;
    e.lx = left - 6;
    e.ly = e.y0 - 4;
    e.anchor = "end";
  }

  const width = tx + TERM_W + PAD;
  const height = y - ROW_GAP + PAD;
  return { steps, terminals, boxes, chips, edges, width, height, left };
}

function edgeTone(e) {
  if (e.option) return "option";
  if (e.t.guardKind === "counter" || e.back) return "back";
  if (e.t.guardKind === "default") return "default";
  return "guard";
}

const TONES = ["default", "guard", "back", "option"];

/** The diagram and, below it, the transitions as a table. */
export function RoutineDiagram({ routine }) {
  const uid = useId("rtd");
  const def = routine.definition || {};
  const g = layout(def);
  const titleId = uid + "-title";
  const descId = uid + "-desc";
  const summary = `Diagram of the routine “${routine.name}”: ${g.steps.length} step${g.steps.length === 1 ? "" : "s"}, ${g.terminals.length} ending${g.terminals.length === 1 ? "" : "s"}, ${g.edges.length} transition${g.edges.length === 1 ? "" : "s"}.`;
  const first = g.boxes[0];

  return html`<div class="rt-diagram" data-testid="rt-diagram">
    <div class="rt-diagram-scroll">
      <svg xmlns="http://www.w3.org/2000/svg" viewBox=${`0 0 ${g.width} ${g.height}`} width=${g.width} height=${g.height}
        role="img" aria-labelledby=${titleId} aria-describedby=${descId} class="rt-svg" data-testid="rt-diagram-svg">
        <title id=${titleId}>${summary}</title>
        <desc id=${descId}>The steps run top to bottom; the transitions are listed in the table below the diagram.</desc>
        <defs>${TONES.map((t) => html`<marker id=${`${uid}-${t}`} viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L10,5 L0,10 z" class=${"rt-arrow rt-arrow-" + t} />
        </marker>`)}</defs>

        ${first && html`<g class="rt-start">
          <circle cx=${first.x + first.w / 2} cy=${PAD + 7} r="6" />
          <line x1=${first.x + first.w / 2} y1=${PAD + 13} x2=${first.x + first.w / 2} y2=${first.y - 1} class="rt-edge rt-e-default" marker-end=${`url(#${uid}-default)`} />
          <text x=${first.x + first.w / 2 + 12} y=${PAD + 11} class="rt-start-text">start: ${clip(prose(def.activation && def.activation.triggerDescription), 48)}</text>
        </g>`}

        ${g.edges.map((e, k) => {
          const tone = edgeTone(e);
          return html`<g class=${"rt-link rt-e-" + tone} data-testid="rt-edge" key=${"e" + k}>
            <title>${`${nodeName(e.t.fromStep, g.steps, g.terminals)} → ${nodeName(e.t.toRef, g.steps, g.terminals)}: ${e.label}`}</title>
            <path d=${e.path} class="rt-edge" marker-end=${`url(#${uid}-${tone})`} />
          </g>`;
        })}

        ${g.boxes.map((b) => {
          const s = b.s;
          const pillW = 12 + s.kind.length * 6.6;
          const titleChars = Math.floor((b.w - pillW - 26) / 7.6);
          return html`<g class=${"rt-node rt-kind-" + s.kind} data-testid="rt-step" data-step=${s.stableStepId} data-kind=${s.kind} key=${"s" + s.stableStepId}>
            <title>${`${stepTitle(s)} — ${s.kind} step${s.toolRef ? ", calls #" + s.toolRef : ""}${s.actionType ? ", action " + s.actionType : ""}: ${prose(s.instruction)}`}</title>
            <rect x=${b.x} y=${b.y} width=${b.w} height=${b.h} rx="6" class="rt-box" />
            <rect x=${b.x + 10} y=${b.y + 9} width=${pillW} height="16" rx="8" class="rt-pill" />
            <text x=${b.x + 10 + pillW / 2} y=${b.y + 21} text-anchor="middle" class="rt-pill-text">${s.kind}</text>
            <text x=${b.x + 18 + pillW} y=${b.y + 22} class="rt-node-title">${clip(stepTitle(s), titleChars)}</text>
            <text x=${b.x + 10} y=${b.y + 42} class=${"rt-node-detail" + (s.kind === "tool" ? " rt-mono" : "")}>${clip(stepDetail(s), 40)}</text>
          </g>`;
        })}

        ${g.chips.map((b, k) => html`<g class=${"rt-terminal rt-term-" + b.t.kind + (b.first ? "" : " rt-term-copy")}
          data-testid=${b.first ? "rt-terminal" : "rt-terminal-copy"} data-kind=${b.t.kind} key=${"t" + k}>
          <title>${`${b.t.kind === "handoff" ? "Hand off to a person" : "Complete"}: ${b.t.stableStepId}${b.t.instruction ? " — “" + prose(b.t.instruction) + "”" : ""}`}</title>
          <rect x=${b.x} y=${b.y} width=${b.w} height=${b.h} rx=${b.h / 2} class="rt-term-box" />
          <text x=${b.x + 18} y=${b.y + 17} class="rt-term-title">${b.t.kind === "handoff"
            ? (b.t.stableStepId === "handoff" ? "⇥ handoff" : `⇥ ${clip(b.t.stableStepId, 14)} (handoff)`)
            : `✓ ${clip(b.t.stableStepId, 24)}`}</text>
          <text x=${b.x + 18} y=${b.y + 32} class="rt-term-detail">${clip(prose(b.t.instruction) || (b.t.kind === "handoff" ? "a person takes over" : "(no closing message)"), 28)}</text>
        </g>`)}

        ${g.edges.map((e, k) => html`<text x=${e.lx} y=${e.ly} text-anchor=${e.anchor} class=${"rt-edge-label rt-l-" + edgeTone(e)} key=${"l" + k}
          aria-hidden="true">${clip(e.label, e.kind === "right" ? 28 : SIDE_CHARS)}</text>`)}
      </svg>
    </div>
    <p class="rt-legend muted small" aria-hidden="true">
      <span class="rt-key rt-key-default"></span> default
      <span class="rt-key rt-key-guard"></span> condition
      <span class="rt-key rt-key-back"></span> loop or jump
      <span class="rt-key rt-key-option"></span> approval option
    </p>
    <${TransitionTable} routine=${routine} g=${g} />
  </div>`;
}

function TransitionTable({ routine, g }) {
  return html`<div class="table-wrap"><table class="table rt-transitions" data-testid="rt-transitions">
    <caption class="rt-caption">Transitions of “${routine.name}”, step by step</caption>
    <thead><tr><th scope="col">From</th><th scope="col">When</th><th scope="col">Goes to</th></tr></thead>
    <tbody>${g.edges.map((e) => html`<tr data-testid="rt-transition">
      <td>${nodeName(e.t.fromStep, g.steps, g.terminals)}</td>
      <td><span class="muted small">${guardKindText(e.t, e.from)}:</span> ${e.label}</td>
      <td>${nodeName(e.t.toRef, g.steps, g.terminals)}${e.back ? html` <span class="muted small">(back to an earlier step)</span>` : ""}</td>
    </tr>`)}</tbody>
  </table></div>`;
}
