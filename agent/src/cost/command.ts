export async function costCommand(_argv: string[]): Promise<number> {
  process.stderr.write("llm-ha cost: not implemented yet\n");
  return 2;
}
