// An agent program in JavaScript, with nothing but Node's own fetch (Node 18+, no npm package).
//
//     boltzoo eval sql-v0 --episodes 8 --agent-command "node examples/agent_programs/agent.mjs"
//
// It reads its task and the env's tools from the rollout (GET $BOLTZOO_ROLLOUT_URL), calls the
// model through the OpenAI-compatible gateway ($OPENAI_BASE_URL/chat/completions, with
// $OPENAI_API_KEY), runs the tools the model calls through the rollout (POST .../tools/NAME) and
// POSTs its final answer to .../answer. The env runs the tools in its sandbox and judges the
// answer. With --log FILE it appends every reply of the model (token ids included) to FILE.
import { appendFileSync } from "node:fs";

const ANSWER_FORMAT = {
  "boltzoo/math-v0": "End with the final answer as \\boxed{NUMBER}.",
  "boltzoo/sql-v0": "Reply with the final query in a ```sql block.",
  "boltzoo/rag-v0": "Reply with one line: 'Answer: <short answer>'.",
};
const key = process.env.OPENAI_API_KEY;
const logIndex = process.argv.indexOf("--log");
const logFile = logIndex > 0 ? process.argv[logIndex + 1] : null;

async function call(url, body) {
  const response = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
  return response.json();
}

const rollout = (path, body) => call(process.env.BOLTZOO_ROLLOUT_URL + path, body);

const task = await rollout("");
const system = `You are the ${task.agent}. Use the tools when they help. ` +
  (ANSWER_FORMAT[task.env] ?? "");
const messages = [
  { role: "system", content: system },
  ...task.task.messages.filter((m) => m.role !== "system"),
];
let message;
for (let i = 0; i < 4; i++) {
  const body = { model: task.model, messages };
  if (task.tools.length) body.tools = task.tools;
  const reply = await call(`${process.env.OPENAI_BASE_URL}/chat/completions`, body);
  if (logFile) appendFileSync(logFile, JSON.stringify(reply) + "\n");
  message = reply.choices[0].message;
  if (!message.tool_calls?.length) break;
  messages.push(message);
  for (const toolCall of message.tool_calls) {
    const args = JSON.parse(toolCall.function.arguments || "{}");
    const { output } = await rollout(`/tools/${toolCall.function.name}`, args);
    messages.push({ role: "tool", tool_call_id: toolCall.id, content: output });
  }
}
await rollout("/answer", { answer: message.content ?? "" });
