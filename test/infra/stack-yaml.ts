// Moved to infra/ so `llm-ha cost` reads stack files with the same parser as the tests.
export * from "../../infra/stack-yaml";
