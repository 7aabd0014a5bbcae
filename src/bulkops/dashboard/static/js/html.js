// One tagged template, `html`, for every component: htm turns template literals into Preact
// elements in the browser, so the dashboard ships as plain files with no build step.
import { h } from "preact";
import htm from "htm";

export const html = htm.bind(h);
