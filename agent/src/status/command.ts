/** `llm-ha status`: placeholder until the fleet view lands. */
export async function statusCommand(_argv: string[]): Promise<number> {
  process.stderr.write("llm-ha status: not built yet\n");
  return 2;
}
