// Placeholder shell: the dashboard pages replace this.
import { h, render } from "../vendor/preact.mjs";
import htm from "../vendor/htm.mjs";

const html = htm.bind(h);
render(html`<main><h1>Steward</h1></main>`, document.getElementById("root"));
