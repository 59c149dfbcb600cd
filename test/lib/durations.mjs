// A node:test reporter beside TAP: the time each test file took (the sum of its
// top-level tests), slowest first, written where `npm test` points it
// (test/durations.txt), so the suite's budget can be read per file.
export default async function* durations(source) {
  const byFile = new Map();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0 && event.data.file) {
      const ms = (event.data.details && event.data.details.duration_ms) || 0;
      byFile.set(event.data.file, (byFile.get(event.data.file) || 0) + ms);
    }
  }
  const rows = [...byFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
  const cwd = `${process.cwd()}/`;
  yield `${rows.map(([file, ms]) => `${(ms / 1000).toFixed(1).padStart(8)} s  ${file.replace(cwd, '')}`).join('\n')}\n` +
    `${(total / 1000).toFixed(1).padStart(8)} s  in ${rows.length} files\n`;
}
