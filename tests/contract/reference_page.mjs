// The API's reference page (built from openapi.yaml by Redocly CLI, Redoc
// 3) in a real browser: Debian's headless Chromium, driven by
// playwright-core. Each operation of openapi.yaml is on the page with every
// status it answers, the Error schema (`error`, `message`) is shown for its
// client errors, the page logs no console error, and it makes no request
// outside its own file (it works offline). A screenshot is saved beside it.
//   node reference_page.mjs PAGE CHROMIUM   (from the repository's root)
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";
import { readFileSync } from "node:fs";
import yaml from "js-yaml";

const [page, executablePath] = process.argv.slice(2);
const spec = yaml.load(readFileSync("openapi.yaml", "utf8"));
const operations = Object.values(spec.paths).flatMap((item) => Object.values(item));
const problems = [];
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
});
try {
  const tab = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  tab.setDefaultTimeout(10000);
  tab.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error: ${message.text()}`);
  });
  tab.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  const url = pathToFileURL(page).href;
  await tab.route("**/*", (route) => {
    const asked = route.request().url();
    if (asked.split("#")[0] === url || /^(data|blob):/.test(asked)) return route.continue();
    problems.push(`a request outside the file: ${asked}`);
    return route.abort();
  });
  await tab.goto(url, { waitUntil: "load" });
  const menu = (text) =>
    tab.locator('[data-component-name="Menu/MenuItem"]', { hasText: new RegExp(`^${escape(text)}`) });
  for (const tag of new Set(operations.flatMap((operation) => operation.tags ?? []))) {
    await menu(tag).first().click();
  }
  for (const operation of operations) {
    // The menu expands after the tag's click: wait for the item, a while.
    const item = menu(operation.summary).first();
    const shown = await item.waitFor({ state: "attached", timeout: 5000 }).then(() => true, () => false);
    if (!shown) {
      problems.push(`the operation ${operation.operationId} (${operation.summary}) is not on the page`);
      continue;
    }
    await menu(operation.summary).first().click();
    await tab.getByRole("heading", { name: operation.summary }).waitFor();
    const main = tab.locator("main");
    for (const status of Object.keys(operation.responses)) {
      if ((await main.getByText(status, { exact: true }).count()) === 0) {
        problems.push(`${operation.operationId}: no ${status} response`);
      }
    }
    const clientError = Object.keys(operation.responses).find((status) => status.startsWith("4"));
    await main.getByText(clientError, { exact: true }).first().click();
    const text = await main.innerText();
    if (!/\berror\b/.test(text) || !/\bmessage\b/.test(text)) {
      problems.push(`${operation.operationId}: the Error schema is not shown for ${clientError}`);
    }
  }
  await menu(operations[0].summary).first().click();
  await tab.getByRole("heading", { name: operations[0].summary }).waitFor();
  await tab.waitForLoadState("networkidle");
  await tab.screenshot({ path: page.replace(/\.html$/, ".png") });
} catch (failure) {
  problems.push(`the page could not be read: ${failure.message.split("\n")[0]}`);
} finally {
  await browser.close();
}
if (problems.length > 0) {
  console.error(`${page}:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`${page}: every operation with its statuses and the Error schema, no console error, no request outside the file`);
