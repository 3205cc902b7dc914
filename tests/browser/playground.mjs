// Drives the playground page in headless Chromium: argv = server base URL, screenshot path.
// Exits non-zero, with what it saw, when the page does not behave.
import { fail, withPage } from "./page.mjs";

const [base, screenshot] = process.argv.slice(2);

await withPage(base, async (page) => {
  await page.waitForSelector('nav button[data-id="Calculator.Add@1.0.0"]', { timeout: 10000 });

  // Pick Calculator.Add@1.0.0, fill the form, call, see the value.
  await page.click('nav button[data-id="Calculator.Add@1.0.0"]');
  await page.fill('[data-path="/a"] input', "10");
  await page.fill('[data-path="/b"] input', "5");
  await page.click("#call");
  await page.waitForSelector("#result.success", { timeout: 5000 });
  const value = (await page.textContent("#value")).trim();
  if (value !== "15") fail(`the value is ${value}, not 15`);
  const curl = await page.textContent("#curl");
  if (!curl.includes("/tools/call") || !curl.includes("Calculator.Add@1.0.0")) fail("no curl command: " + curl);
  console.log("value: ok");

  // A 422: 1.5 is not an integer; the error shows next to the field.
  await page.fill('[data-path="/a"] input', "1.5");
  await page.click("#call");
  await page.waitForSelector("#result.invalid", { timeout: 5000 });
  const fieldError = (await page.textContent('[data-path="/a"] .err')).trim();
  if (!fieldError.includes("integer")) fail(`the field error is "${fieldError}"`);
  const untouched = (await page.textContent('[data-path="/b"] .err')).trim();
  if (untouched) fail(`b has an error it should not: "${untouched}"`);
  console.log("422 field error: ok");

  // Doorbell.Ring: the tool error and its retry hints.
  await page.click('nav button[data-id="Doorbell.Ring@0.1.0"]');
  await page.fill('[data-path="/doorbell_id"] input', "doorbell1");
  await page.click("#call");
  await page.waitForSelector("#result.tool-error", { timeout: 5000 });
  const hint = await page.textContent("#retry-hint");
  if (!hint.includes("500 ms")) fail(`the retry hint is "${hint}"`);
  const promptHint = await page.textContent("#prompt-hint");
  if (promptHint !== "ids: doorbell42,doorbell84") fail(`the prompt hint is "${promptHint}"`);
  console.log("retry hint: ok");

  // Calculator.Add@2.0.0 states its behaviour: its title and badges show, and an example
  // fills the input.
  const addTwo = 'nav button[data-id="Calculator.Add@2.0.0"]';
  const navBadges = await page.textContent(addTwo);
  if (!navBadges.includes("read-only") || !navBadges.includes("idempotent")) fail(`the nav shows "${navBadges}"`);
  await page.click(addTwo);
  const heading = await page.textContent("#tool h2");
  if (!heading.startsWith("Add numbers")) fail(`the heading is "${heading}"`);
  if (heading.includes("destructive")) fail("a badge the tool did not state");
  await page.click("button.example");
  const filled = JSON.parse(await page.inputValue("#raw-input"));
  if (filled.a !== 1.5 || filled.b !== 2) fail("the example filled " + JSON.stringify(filled));
  await page.click("#call");
  await page.waitForSelector("#result.success", { timeout: 5000 });
  if ((await page.textContent("#value")).trim() !== "3.5") fail("the example's call did not give 3.5");
  console.log("hints and examples: ok");

  // Doorbell.Forget is destructive: nothing is sent until the user confirms.
  await page.click('nav button[data-id="Doorbell.Forget@0.1.0"]');
  await page.fill('[data-path="/doorbell_id"] input', "doorbell42");
  let asked = "";
  page.once("dialog", (dialog) => { asked = dialog.message(); dialog.dismiss(); });
  await page.click("#call");
  await page.waitForTimeout(300);
  if (!asked.includes("may destroy or overwrite data")) fail(`the confirmation said "${asked}"`);
  if (await page.$("#result")) fail("a declined call was sent");
  page.once("dialog", (dialog) => dialog.accept());
  await page.click("#call");
  await page.waitForSelector("#result.success", { timeout: 5000 });
  console.log("destructive confirmation: ok");

  // Resources: the fixed one is read as it is; the template's parameter fills its URI.
  await page.click('nav button[data-resource="doorbell://all"]');
  await page.click("#read");
  await page.waitForSelector("#result.success .resource-text", { timeout: 5000 });
  const all = JSON.parse(await page.textContent("#result .resource-text"));
  if (JSON.stringify(all) !== '["doorbell42","doorbell84"]') fail("doorbell://all read " + JSON.stringify(all));
  await page.click('nav button[data-resource="doorbell://{doorbell_id}/status"]');
  await page.fill('[data-param="doorbell_id"]', "doorbell42");
  const uri = await page.textContent("#resource-uri");
  if (uri !== "doorbell://doorbell42/status") fail(`the template's URI is "${uri}"`);
  await page.click("#read");
  await page.waitForSelector("#result.success .resource-text", { timeout: 5000 });
  const status = JSON.parse(await page.textContent("#result .resource-text"));
  if (status.battery !== "ok" || status.doorbell !== "doorbell42") fail("the status read " + JSON.stringify(status));
  if (!(await page.textContent("#request-json")).includes("doorbell://doorbell42/status")) fail("no request shown");
  // The function's own error is shown as its error.
  await page.fill('[data-param="doorbell_id"]', "doorbell7");
  await page.click("#read");
  await page.waitForSelector("#result.tool-error", { timeout: 5000 });
  const readError = await page.textContent("#result");
  if (!readError.includes("No doorbell doorbell7")) fail(`the read's error is "${readError}"`);
  console.log("resources: ok");

  // A prompt: its arguments filled, its messages shown by role.
  await page.click('nav button[data-prompt="greet_visitor"]');
  const promptHeading = await page.textContent("#tool h2");
  if (!promptHeading.startsWith("Greet a visitor")) fail(`the prompt's heading is "${promptHeading}"`);
  await page.fill('[data-arg="name"]', "Ada");
  await page.click("#get-prompt");
  await page.waitForSelector("#messages .message.user", { timeout: 5000 });
  const said = await page.textContent("#messages .message.user .text");
  if (!said.includes("welcome Ada")) fail(`the prompt's message is "${said}"`);
  // A required argument left empty: the server's 400 names it.
  await page.fill('[data-arg="name"]', "");
  await page.click("#get-prompt");
  await page.waitForSelector("#result.invalid", { timeout: 5000 });
  const missing = await page.textContent("#result");
  if (!missing.includes("`name` is required")) fail(`a missing argument shows "${missing}"`);
  console.log("prompts: ok");

  // A skill the server ships: its SKILL.md shown as it is read over MCP.
  await page.click('nav button[data-skill="doorbells"]');
  await page.waitForSelector("#result.success .resource-text", { timeout: 5000 });
  const skillText = await page.textContent("#result .resource-text");
  if (!skillText.startsWith("---\nname: doorbells") || !skillText.includes("Doorbell_Ring")) fail(`the SKILL.md read "${skillText}"`);
  if (!(await page.textContent("#result small")).includes("text/markdown")) fail("the SKILL.md's media type");
  if (!(await page.textContent("#request-json")).includes("skill://doorbells/SKILL.md")) fail("no request shown");
  console.log("skills: ok");

  await page.screenshot({ path: screenshot, fullPage: true });
  console.log("screenshot: " + screenshot);
});
