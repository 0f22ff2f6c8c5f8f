/** `llm-ha drill`: placeholder until the drill lands. */
export async function drillCommand(_argv: string[]): Promise<number> {
  process.stderr.write("llm-ha drill: not built yet\n");
  return 2;
}
