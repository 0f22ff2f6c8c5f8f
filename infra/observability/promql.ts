/** The metric names a PromQL expression reads (the scrape keep-lists and the tests use it). */
const KEYWORDS = new Set([
  "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "atan2",
  "inf", "nan", "le",
]);

/**
 * Metric names an expression selects. Strings, label matchers, ranges and grouping
 * clauses are stripped first; what is left that is not a function call, a keyword or a
 * number is a metric name.
 */
export function metricNames(expr: string): string[] {
  let s = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  s = s.replace(/\{[^}]*\}/g, " ").replace(/\[[^\]]*\]/g, " ");
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const names = new Set<string>();
  for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = m[0];
    const before = s[m.index - 1];
    if (before !== undefined && /[0-9.]/.test(before)) continue; // 1e3, 5m
    if (KEYWORDS.has(word.toLowerCase())) continue;
    if (/^\s*\(/.test(s.slice(m.index + word.length))) continue; // a function
    names.add(word);
  }
  return [...names].sort();
}

/** HAProxy names the expressions read: what the L1 scrape keeps (its `up` is Prometheus' own). */
export function haproxyKeepList(exprs: readonly string[]): string[] {
  return [...new Set(exprs.flatMap(metricNames).filter((n) => n.startsWith("haproxy_")))].sort();
}
