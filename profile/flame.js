'use strict';
// A flame graph as a standalone SVG from folded stacks ("a;b;c" -> samples).
// Written here because no maintained npm package renders folded stacks to SVG
// without a browser DOM (d3-fg and the React/Grafana components need one; 0x
// drives its own profiling run) and Debian 12 packages no flame graph tool.
// Frames are boxes as wide as their samples, callers below callees; the
// full name and sample count are in each box's <title> (hover).

const ROW = 16;
const WIDTH = 1200;
const MIN_PX = 0.5;

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function tree(stacks) {
  const root = { name: 'all', value: 0, kids: new Map() };
  for (const [key, n] of stacks) {
    root.value += n;
    let node = root;
    for (const f of key.split(';')) {
      if (!node.kids.has(f)) node.kids.set(f, { name: f, value: 0, kids: new Map() });
      node = node.kids.get(f);
      node.value += n;
    }
  }
  return root;
}

// Warm colours for native frames, green for JavaScript, blue for the kernel.
function colour(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  const v = h % 60;
  if (name.endsWith(' [js]')) return `rgb(${60 + v},${180 + (v % 50)},${60 + v})`;
  if (/^(entry_|do_|__x64_sys|sys_|tcp_|unix_|sock_|__)/.test(name)) return `rgb(${80 + v},${140 + v},230)`;
  return `rgb(230,${100 + v * 2},${40 + v})`;
}

function renderSvg(stacks, { title = 'Flame graph' } = {}) {
  const root = tree(stacks);
  const boxes = [];
  let depth = 0;
  const walk = (node, x, d) => {
    const w = root.value ? (node.value / root.value) * WIDTH : 0;
    if (w < MIN_PX) return;
    depth = Math.max(depth, d);
    boxes.push({ node, x, d, w });
    let cx = x;
    for (const k of [...node.kids.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      walk(k, cx, d + 1);
      cx += root.value ? (k.value / root.value) * WIDTH : 0;
    }
  };
  walk(root, 0, 0);
  const height = (depth + 1) * ROW + 40;
  const parts = boxes.map(({ node, x, d, w }) => {
    const y = height - (d + 1) * ROW - 10;
    const share = root.value ? ((node.value / root.value) * 100).toFixed(1) : '0';
    const chars = Math.floor((w - 6) / 7);
    const label = chars >= 3 ? (node.name.length > chars ? `${node.name.slice(0, chars - 2)}..` : node.name) : '';
    return `<g><title>${esc(node.name)} (${node.value} samples, ${share}%)</title>` +
      `<rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${ROW - 1}" fill="${colour(node.name)}" rx="2"/>` +
      (label ? `<text x="${(x + 3).toFixed(1)}" y="${y + ROW - 4}">${esc(label)}</text>` : '') + '</g>';
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="monospace" font-size="11">\n` +
    `<text x="${WIDTH / 2}" y="16" text-anchor="middle" font-size="14">${esc(title)} (${root.value} samples)</text>\n${parts.join('\n')}\n</svg>\n`;
}

module.exports = { renderSvg };
