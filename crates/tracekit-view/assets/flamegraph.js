// The flame graph's drawing, for both pages: a call tree's nodes laid out as
// boxes (x and width from the weights, depth from the parents) and drawn as
// elements, each as wide as its weight, its callees beside each other under
// it (or over it, drawn upward).
//
// A node is {parent, name, total}, in preorder (parents first); the first
// node is the root, as wide as the drawing.

import { el } from './dom.js';

export function layout(nodes, width) {
  const x = new Float64Array(nodes.length);
  const w = new Float64Array(nodes.length);
  const depth = new Int32Array(nodes.length);
  const next = new Float64Array(nodes.length); // where a node's next callee starts
  let depthMax = 0;
  nodes.forEach((n, i) => {
    if (n.parent < 0) {
      x[i] = 0;
      w[i] = width;
    } else {
      const p = n.parent;
      w[i] = nodes[p].total ? (w[p] * n.total) / nodes[p].total : 0;
      x[i] = next[p];
      next[p] += w[i];
      depth[i] = depth[p] + 1;
    }
    next[i] = x[i];
    depthMax = Math.max(depthMax, depth[i]);
  });
  return { x, w, depth, depthMax };
}

// Draws the laid out `nodes` into `box`, a box per node at least half a
// pixel wide. Options: `row` the height of a row (px); `up` puts depth 0 at
// the bottom; `skipRoot` leaves the root out; `colour(name, node)` a
// box's background; `title(node)` its tooltip; `click(i)` what a click on it does;
// `minText` the narrowest box (px) that shows its name; `attrs(node)` more of
// its attributes.
export function drawBoxes(box, nodes, lay, opts) {
  const { row = 17, up = false, skipRoot = false, colour, title, click, minText = 0, attrs: more } = opts;
  const rows = lay.depthMax + (skipRoot ? 0 : 1);
  box.style.height = rows * row + 'px';
  const frag = document.createDocumentFragment();
  nodes.forEach((n, i) => {
    if (lay.w[i] < 0.5 || (skipRoot && i === 0)) return;
    const d = lay.depth[i] - (skipRoot ? 1 : 0);
    const attrs = { ...(title ? { title: title(n) } : {}), ...(more ? more(n) : {}) };
    const e = el('div', { ...attrs, text: lay.w[i] >= minText ? n.name : '' });
    e.style.left = lay.x[i] + 'px';
    e.style.top = (up ? rows - 1 - d : d) * row + 'px';
    e.style.width = lay.w[i] + 'px';
    e.style.background = colour(n.name, n);
    if (click) e.addEventListener('click', () => click(i));
    frag.append(e);
  });
  box.append(frag);
}

// A change's colour, -1 (shrank the most) to 1 (grew the most): pale at no
// change, saturated at the largest, as the SVG's differential flame graph
// shades it, for both pages' differential flame graphs.
export function diffColour(change) {
  const fade = Math.round(210 * (1 - Math.min(1, Math.abs(change))));
  if (change > 0) return `rgb(255,${fade},${fade})`;
  if (change < 0) return `rgb(${fade},${fade},255)`;
  return 'rgb(250,250,250)';
}
