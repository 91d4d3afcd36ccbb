// The routine a chat reply touched, in one line: its name, its status as a badge, the inputs it
// still waits for and the tool it called (a reply's `routine`).

import { Badge, html } from "../ui.js";

const STATUS = {
  active: ["running", "blue"],
  waiting_for_input: ["waiting for input", "amber"],
  waiting_for_approval: ["waiting for approval", "amber"],
  completed: ["completed", "green"],
  abandoned: ["abandoned", "gray"],
};

/** `order_ref` → `order ref`. */
export function words(key) {
  return String(key || "").replace(/_/g, " ");
}

export function RoutineStatus({ routine }) {
  if (!routine) return null;
  const [label, tone] = STATUS[routine.status] || [routine.status || "unknown", "gray"];
  const pending = routine.pendingInput || [];
  return html`<p class="rt-status" data-testid="chat-routine" data-status=${routine.status}>
    <span class="muted">Routine</span> <strong data-testid="chat-routine-name">${routine.name}</strong>
    <${Badge} tone=${tone} testid="chat-routine-status">${label}</${Badge}>
    ${pending.length > 0 && html`<span data-testid="chat-routine-pending">Waiting for: ${pending.map((p, i) => html`${i ? ", " : ""}<span title=${[p.type, p.required ? "required" : "optional", p.description].filter(Boolean).join(" · ")}>${words(p.key)}${p.required ? "" : " (optional)"}</span>`)}</span>`}
    ${routine.toolName && html`<span data-testid="chat-routine-tool">Tool called: <code>#${routine.toolName}</code></span>`}
  </p>`;
}
