// IPv4/IPv6 CIDR arithmetic for the network policies: which blocks are the world (anything
// routable on the internet) and which cover a VPC.

/** An IPv4 CIDR as [first address, prefix length]; undefined for anything else. */
function v4(cidr: string): [number, number] | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr.trim());
  if (!m) return undefined;
  const octets = m.slice(1, 5).map(Number);
  const len = Number(m[5]);
  if (octets.some((o) => o > 255) || len > 32) return undefined;
  const addr = octets.reduce((a, o) => a * 256 + o, 0);
  const size = 2 ** (32 - len);
  return [Math.floor(addr / size) * size, len];
}

/** RFC 1918, CGNAT (RFC 6598), loopback and link-local: not reachable from the internet. */
const NOT_PUBLIC_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16"];

/** Whether IPv4 block `outer` contains block `inner` (equal counts). */
export function cidrContains(outer: string, inner: string): boolean {
  const o = v4(outer);
  const i = v4(inner);
  if (!o || !i) return false;
  if (i[1] < o[1]) return false;
  const size = 2 ** (32 - o[1]);
  return Math.floor(i[0] / size) * size === o[0];
}

/**
 * Whether a CIDR reaches addresses on the internet: `0.0.0.0/0`, `::/0`, and any block that is
 * not wholly inside private, CGNAT, loopback or link-local space (IPv6: outside ULA `fc00::/7`
 * and link-local `fe80::/10`). A block that cannot be parsed counts as public: it cannot be
 * shown private.
 */
export function isPublicCidr(cidr: string): boolean {
  const c = cidr.trim().toLowerCase();
  if (c.includes(":")) {
    const len = Number(c.split("/")[1] ?? "128");
    const ula = /^f[cd][0-9a-f]{0,2}:/.test(c) && len >= 7;
    const linkLocal = /^fe[89ab][0-9a-f]?:/.test(c) && len >= 10;
    return !(ula || linkLocal);
  }
  if (!v4(c)) return true;
  return !NOT_PUBLIC_V4.some((p) => cidrContains(p, c));
}
