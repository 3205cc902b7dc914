// Drives the playground page in headless Chromium against oxp-runtime/examples/task_server.rs:
// argv = server base URL. A task tool is called as an MCP task: the page shows its status and
// status message while it runs, cancels it, shows a finished task's value, and asks the user
// the questions a tool asks inside its task and before it, sending the answers; a plain tool
// and a prompt that ask are answered the same way over MCP.
// Exits non-zero, with what it saw, when the page does not behave.
import { fail, withPage } from "./page.mjs";

const [base] = process.argv.slice(2);

await withPage(base, async (page) => {
  await page.waitForSelector('nav button[data-id="Jobs.Hold@1.0.0"] .badge.task', { timeout: 10000 });

  // A task that holds until cancelled: its status and message, then the page cancels it.
  await page.click('nav button[data-id="Jobs.Hold@1.0.0"]');
  await page.click("#call");
  await page.waitForSelector("#task-status", { timeout: 10000 });
  await page.waitForFunction(() => document.querySelector("#task-message")?.textContent === "1/1: holding",
    null, { timeout: 30000 });
  if ((await page.textContent("#task-status")) !== "working") fail("a held task is not working");
  console.log("running status: ok");
  await page.click("#cancel-task");
  await page.waitForFunction(() => document.querySelector("#task-status")?.textContent === "cancelled",
    null, { timeout: 30000 });
  console.log("cancel: ok");

  // A task that completes: its value.
  await page.click('nav button[data-id="Jobs.Count@1.0.0"]');
  await page.fill('[data-path="/steps"] input', "2");
  await page.fill('[data-path="/step_ms"] input', "10");
  await page.click("#call");
  await page.waitForSelector("#result.success", { timeout: 30000 });
  const value = await page.textContent("#value");
  if (!value.startsWith("counted to 2 (run")) fail(`the value is ${value}`);
  console.log("result: ok");

  // Questions inside a task: each shown as it is asked, answered from the page.
  await page.click('nav button[data-id="Jobs.Ship@1.0.0"]');
  await page.click("#toggle-raw");
  await page.fill("#raw-input", JSON.stringify({ items: ["apples", "pears"] }));
  await page.click("#call");
  await page.waitForSelector('[data-ask="ship"]', { timeout: 30000 });
  if (!(await page.textContent('[data-ask="ship"]')).includes("Ship apples?")) fail("the first question");
  if ((await page.textContent("#task-status")) !== "input_required") fail("a question is not input_required");
  await page.click('[data-ask="ship"] button[data-answer="accept"]');
  // The next question has a key of its own: an answered one is never asked again.
  await page.waitForSelector('[data-ask="ship#2"]', { timeout: 30000 });
  if (!(await page.textContent('[data-ask="ship#2"]')).includes("Ship pears?")) fail("the second question");
  await page.click('[data-ask="ship#2"] button[data-answer="accept"]');
  await page.waitForSelector("#result.success", { timeout: 30000 });
  const shipped = await page.textContent("#value");
  if (!shipped.startsWith("shipped apples, pears (run")) fail(`the value is ${shipped}`);
  console.log("questions inside a task: ok");

  // A question declined: the tool's own answer to that.
  await page.click('nav button[data-id="Jobs.Ship@1.0.0"]');
  await page.click("#toggle-raw");
  await page.fill("#raw-input", JSON.stringify({ items: ["plums"] }));
  await page.click("#call");
  await page.waitForSelector('[data-ask="ship"] button[data-answer="decline"]', { timeout: 30000 });
  await page.click('[data-ask="ship"] button[data-answer="decline"]');
  await page.waitForSelector("#result.tool-error", { timeout: 30000 });
  console.log("a declined question: ok");

  // A question before the task: answered in a form, the call sent again with its answer.
  await page.click('nav button[data-id="Jobs.Welcome@1.0.0"]');
  await page.click("#call");
  await page.waitForSelector('[data-path="@user_name/name"] input', { timeout: 30000 });
  if (!(await page.textContent('[data-ask="user_name"]')).includes("What is your name?")) fail("the question");
  await page.fill('[data-path="@user_name/name"] input', "Alice");
  await page.click('[data-ask="user_name"] button[data-answer="accept"]');
  await page.waitForSelector("#result.success", { timeout: 30000 });
  const welcomed = await page.textContent("#value");
  if (!welcomed.startsWith("Welcome, Alice (run")) fail(`the value is ${welcomed}`);
  console.log("a question before the task: ok");

  // A plain tool that asks, called over MCP from the page: its question answered there.
  await page.click('nav button[data-id="Jobs.Archive@1.0.0"]');
  await page.fill('[data-path="/name"] input', "box 7");
  await page.click("#call-mcp");
  await page.waitForSelector('#ask button[data-answer="accept"]', { timeout: 30000 });
  if (!(await page.textContent("#ask")).includes("Archive box 7?")) fail("the plain tool's question");
  await page.click('#ask button[data-answer="accept"]');
  await page.waitForSelector("#result.success", { timeout: 30000 });
  const archived = await page.textContent("#value");
  if (archived !== "archived box 7") fail(`the value is ${archived}`);
  console.log("a plain tool's question over MCP: ok");

  // A prompt that asks, rendered over MCP from the page: its question answered there.
  await page.click('nav button[data-prompt="standup"]');
  await page.click("#get-prompt-mcp");
  await page.waitForSelector('[data-path="@team/team"] input', { timeout: 30000 });
  await page.fill('[data-path="@team/team"] input', "Platform");
  await page.click('[data-ask="team"] button[data-answer="accept"]');
  await page.waitForSelector("#messages .message.user", { timeout: 30000 });
  const said = await page.textContent("#messages .message.user .text");
  if (said !== "Run the Platform stand-up.") fail(`the prompt's message is "${said}"`);
  console.log("a prompt's question over MCP: ok");
});
