// The dashboard in headless Chromium (Debian's chromium, driven by
// playwright-core from tests/browser/package-lock.json), against the real
// troupe binary loading a snapshot:
//
//   known:  tests/browser/cluster.json (make_cluster.py says what is in it):
//           the node count, one node's used and free GPUs and its holder's
//           colour in the legend, an unhealthy GPU, a pod of unknown devices,
//           the gang list; a filter and a bind sent to the verbs show up live
//           (the bound pod on its node, filter and bind latency), and a gang
//           member's filter plans gang ml/llm (its reserved GPUs striped, its
//           places listed); a click through to gang ml/train shows it and only
//           its nodes; a search by node; a screenshot (--screenshot PATH;
//           docs/dashboard.png).
//   large:  5,000 nodes from bench/gen_cluster.py: the JSON under its caps
//           (dashboard.h) and the page under its element cap (dashboard.js's
//           DOM_CAP) in the domain summary, one domain, and a search
//           matching thousands of nodes; --screenshot-large: the summary
//           opened down to one domain (docs/dashboard-5000.png).
//
// node test_dashboard.mjs [known|large]... [--screenshot PATH] [--screenshot-large PATH]
// Environment: TROUPE_BIN, TROUPE_SOURCE_ROOT, TROUPE_NODE_MODULES (where
// `npm ci` put playwright-core; scripts/lib/common.sh ensure_browser_tools),
// CHROMIUM (default /usr/bin/chromium). Exits 77 (skipped) when playwright-core
// or chromium is missing, 1 on a failed check.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = process.env.TROUPE_SOURCE_ROOT || path.resolve(here, "../..");
const bin = process.env.TROUPE_BIN || path.join(root, "build/src/extender/troupe");
const modules = process.env.TROUPE_NODE_MODULES || path.join(root, "build/browser/node_modules");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";

// The caps the JSON and the page state (src/extender/dashboard.h, dashboard.js).
const JSON_MAX = 1 << 20;
const PAGE_NODES = 512;
const DOM_CAP = 15000;
// What a 5,000-node summary must stay under: a domain summary is about 100
// bytes, and gen_cluster's fleet has under 1,000 domains.
const SUMMARY_MAX = 160 * 1024;

const pw = path.join(modules, "playwright-core", "index.mjs");
if (!fs.existsSync(pw) || !fs.existsSync(chromiumPath)) {
	console.log(`SKIP: needs ${pw} (scripts/lib/common.sh ensure_browser_tools) and ${chromiumPath}`);
	process.exit(77);
}
const { chromium } = await import(pw);

/* ---- troupe ---------------------------------------------------------------- */

// Start troupe on a snapshot; resolves once both listeners logged their ports.
function startTroupe(snapshot) {
	return new Promise((resolve, reject) => {
		const p = spawn(bin, ["--cluster", snapshot, "--listen", "127.0.0.1:0",
			"--ops-address", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] });
		let log = "";
		const t = { proc: p, log: () => log };
		const scan = (chunk) => {
			log += chunk;
			const verbs = /(?<!ops )listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
			const ops = /ops listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
			if (verbs && ops && !t.ops) {
				t.verbs = `http://127.0.0.1:${verbs[1]}`;
				t.ops = `http://127.0.0.1:${ops[1]}`;
				resolve(t);
			}
		};
		p.stdout.on("data", scan);
		p.stderr.on("data", scan);
		p.on("exit", (code) => reject(new Error(`troupe exited (${code}) before listening:\n${log}`)));
	});
}

function stopTroupe(t) {
	if (t && t.proc.exitCode === null) t.proc.kill("SIGTERM");
}

async function post(base, verb, body) {
	const r = await fetch(`${base}/${verb}`, { method: "POST", body: JSON.stringify(body),
		headers: { "Content-Type": "application/json" } });
	assert.equal(r.status, 200, `${verb} answered ${r.status}`);
	return r.json();
}

async function getJson(base, query = "") {
	const r = await fetch(`${base}/debug/dashboard.json${query}`);
	assert.equal(r.status, 200);
	const text = await r.text();
	return { bytes: Buffer.byteLength(text), data: JSON.parse(text) };
}

/* ---- the page ----------------------------------------------------------------- */

async function openPage(browser, url) {
	const page = await browser.newPage({ viewport: { width: 1440, height: 660 } });
	const errors = [];
	page.on("pageerror", (e) => errors.push(e.message));
	// A Content-Security-Policy refusal (troupe sends one with the page)
	// shows only here, as a console error.
	page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
	await page.goto(url);
	page.errors = errors;
	return page;
}

const elements = (page) => page.evaluate(() => document.getElementsByTagName("*").length);

// Wait for the page to show what <fn> (run in the page) returns truthy for.
async function until(page, fn, arg, what) {
	try {
		await page.waitForFunction(fn, arg, { timeout: 30000, polling: 100 });
	} catch (e) {
		throw new Error(`the page never showed ${what}: ${e.message}`);
	}
}

function gpuStates(page, node) {
	return page.$$eval(`[data-node="${node}"] .g`, (gs) => gs.map((g) => ({
		state: g.dataset.state, owner: g.dataset.owner || "", colour: g.style.backgroundColor })));
}

async function searchFor(page, text) {
	await page.fill("#search", text);
}

/* ---- the known cluster --------------------------------------------------------- */

async function known(browser, screenshot) {
	const t = await startTroupe(path.join(here, "cluster.json"));
	try {
		const page = await openPage(browser, `${t.ops}/debug/dashboard`);
		await until(page, () => document.querySelector('[data-k="nodes"]')?.textContent === "7",
			null, "7 nodes");
		assert.equal(await page.textContent('[data-k="gpus"]'), "56");
		assert.equal(await page.textContent('[data-k="used"]'), "23");
		assert.equal(await page.$$eval("[data-node]", (n) => n.length), 7);

		// h100-a1-2: devices 0-3 free, 4-7 held by pod ml/eval, in the legend's colour.
		const eval_ = await gpuStates(page, "h100-a1-2");
		assert.deepEqual(eval_.map((g) => g.state), ["free", "free", "free", "free", "used", "used", "used", "used"]);
		assert.ok(eval_.slice(4).every((g) => g.owner === "ml/eval"));
		const legend = await page.$eval('#legend [data-owner="ml/eval"] i', (i) => i.style.backgroundColor);
		assert.equal(eval_[4].colour, legend, "a GPU takes its holder's legend colour");
		// Gang ml/train holds both other H100s whole, in one colour of its own.
		const train = [...await gpuStates(page, "h100-a1-0"), ...await gpuStates(page, "h100-a1-1")];
		assert.ok(train.every((g) => g.owner === "ml/train"));
		assert.notEqual(train[0].colour, legend);
		// v100-a2-1: GPU 7 unhealthy; GPU 0 drawn for ops/legacy (no troupe.io/gpu-ids).
		const v = await gpuStates(page, "v100-a2-1");
		assert.equal(v[7].state, "unhealthy");
		assert.equal(v[0].owner, "ops/legacy");
		// The cube-mesh V100 is drawn as two islands of four.
		assert.deepEqual(await page.$$eval('[data-node="v100-a2-0"] .g', (gs) =>
			gs.map((g, i) => (g.classList.contains("isl") ? i : -1)).filter((i) => i >= 0)), [4]);
		// Three network domains: zone-a/block-1, zone-a/block-2, zone-b/block-3.
		assert.equal(await page.$$eval("#nodes .domain", (d) => d.length), 3);
		// Gangs: ml/llm waiting (the manager found its members) or pending, ml/train bound.
		await until(page, () => document.querySelectorAll("#gangs tr.row").length === 2, null, "two gangs");
		const gangs = await page.$$eval("#gangs tr.row", (rs) => rs.map((r) => [r.dataset.gang,
			r.querySelector(".st").textContent]));
		assert.deepEqual(gangs.map((g) => g[0]).sort(), ["ml/llm", "ml/train"]);
		assert.match(gangs.find((g) => g[0] === "ml/train")[1], /^bound/);
		assert.equal(await page.textContent('#gangs tr.row[data-gang="ml/train"] td:nth-child(4)'), "16");
		assert.match(gangs.find((g) => g[0] === "ml/llm")[1], /^(waiting|pending)/);

		// Live: a filter and a bind on the verbs show the pod on its node and the latency.
		const pod = { metadata: { name: "live-1", namespace: "ml", uid: "uid-live-1" },
			spec: { containers: [{ name: "main", resources: { limits: { "nvidia.com/gpu": "2" } } }] } };
		const f = await post(t.verbs, "filter", { Pod: pod, NodeNames: ["h100-a1-2"] });
		assert.deepEqual(f.NodeNames, ["h100-a1-2"], JSON.stringify(f));
		const b = await post(t.verbs, "bind", { PodName: "live-1", PodNamespace: "ml",
			PodUID: "uid-live-1", Node: "h100-a1-2" });
		assert.ok(!b.Error, b.Error);
		await until(page, () => [...document.querySelectorAll('[data-node="h100-a1-2"] .g')]
			.filter((g) => g.dataset.owner === "ml/live-1").length === 2, null, "ml/live-1's 2 GPUs");
		await until(page, () => /\d+ requests?\)/.test(document.querySelector('[data-verb="bind"]').textContent),
			null, "bind latency");
		assert.match(await page.textContent('[data-verb="filter"]'), /µs|ms|s \(/);

		// Gang ml/llm's member filtered: the gang is planned, its 2 x 4 GPUs
		// reserved (drawn striped, in the gang's colour).
		const cluster = JSON.parse(fs.readFileSync(path.join(here, "cluster.json"), "utf8"));
		const llm0 = cluster.items.find((i) => i.metadata.name === "llm-0");
		const names = cluster.items.filter((i) => i.kind === "Node").map((i) => i.metadata.name);
		await post(t.verbs, "filter", { Pod: llm0, NodeNames: names });
		await until(page, () => document.querySelectorAll('.g.planned[data-owner="ml/llm"]').length === 8,
			null, "ml/llm's 8 reserved GPUs");
		await until(page, () => document.querySelector('#gangs tr.row[data-gang="ml/llm"] .st')
			.textContent === "planned", null, "ml/llm planned");
		await page.click('#gangs tr.row[data-gang="ml/llm"]');
		await until(page, () => document.querySelectorAll("#gang-detail [data-node-link]").length === 2,
			null, "ml/llm's two places");
		assert.deepEqual(await page.$$eval("[data-node]", (n) => n.map((x) => x.dataset.node)),
			["v100-a2-0", "v100-a2-1"]);
		await page.click('#gangs tr.row[data-gang="ml/llm"]');

		// Click through to gang ml/train: its detail, and only its two nodes.
		await page.click('#gangs tr.row[data-gang="ml/train"]');
		await until(page, () => !document.getElementById("gang-detail").hidden &&
			document.querySelectorAll("[data-node]").length === 2, null, "ml/train's nodes");
		assert.equal(await page.textContent('#gang-detail [data-k="gang"]'), "ml/train");
		assert.equal(await page.textContent('#gang-detail [data-k="state"]'), "bound");
		assert.deepEqual(await page.$$eval("[data-node]", (n) => n.map((x) => x.dataset.node)),
			["h100-a1-0", "h100-a1-1"]);
		await page.click('#gangs tr.row[data-gang="ml/train"]');   // and back
		await until(page, () => document.querySelectorAll("[data-node]").length === 7, null, "all nodes again");

		// Search by node.
		await searchFor(page, "v100-a2-0");
		await until(page, () => document.querySelectorAll("[data-node]").length === 1, null, "one node");
		assert.equal(await page.getAttribute("[data-node]", "data-node"), "v100-a2-0");
		assert.equal(await page.textContent("#scope"), "1 nodes match");
		await searchFor(page, "");
		await until(page, () => document.querySelectorAll("[data-node]").length === 7, null, "all nodes");

		assert.deepEqual(page.errors, []);
		assert.ok(await elements(page) < DOM_CAP);
		if (screenshot) {
			await page.waitForTimeout(4000);        /* a few polls into the charts */
			await page.screenshot({ path: screenshot, fullPage: true });
			console.log(`screenshot: ${screenshot}`);
		}
		await page.close();
		console.log("ok known: 7 nodes, holders, islands, gangs, live bind, a planned gang, click-through, search");
	} catch (e) {
		console.log(t.log());
		throw e;
	} finally {
		stopTroupe(t);
	}
}

/* ---- 5,000 nodes --------------------------------------------------------------- */

async function large(browser, shots) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-dash-"));
	execFileSync("python3", [path.join(root, "bench/gen_cluster.py"), "--nodes", "5000",
		"--names", "500", "--full-nodes", "100", "--out", dir], { stdio: "ignore" });
	const t = await startTroupe(path.join(dir, "cluster.json"));
	try {
		const s = await getJson(t.ops);
		assert.equal(s.data.mode, "summary");
		assert.equal(s.data.totals.nodes, 5000);
		assert.equal(s.data.nodes.length, 0, "a summary sends no nodes");
		assert.ok(s.data.domains.length > 10);
		assert.equal(s.data.domains.reduce((a, d) => a + d.n, 0), 5000, "the domains add up");
		assert.ok(s.bytes < SUMMARY_MAX, `summary is ${s.bytes} bytes`);
		const wide = await getJson(t.ops, "?q=dgx");
		assert.ok(wide.data.matched > PAGE_NODES, `${wide.data.matched} match "dgx"`);
		assert.equal(wide.data.nodes.length, PAGE_NODES);
		assert.ok(wide.bytes < JSON_MAX, `a page is ${wide.bytes} bytes`);
		assert.equal(wide.data.truncated, false);
		console.log(`5,000 nodes: summary ${s.bytes} bytes (${s.data.domains.length} domains), ` +
			`a page of ${PAGE_NODES} nodes ${wide.bytes} bytes`);

		const page = await openPage(browser, `${t.ops}/debug/dashboard`);
		// The domain tree, folded: one row per zone, whose nodes add up.
		const zones = new Set(s.data.domains.map((d) => d.p[0])).size;
		await until(page, (n) => document.querySelectorAll(".domain-row").length === n, zones, `${zones} zone rows`);
		assert.equal(await page.$$eval(".domain-row", (rs) => rs.reduce((a, r) =>
			a + Number(/(\d+) nodes/.exec(r.textContent)[1]), 0)), 5000);
		// Open the first row down to a finest domain, and that domain's nodes.
		const first = s.data.domains[0];
		for (let depth = 0; depth < s.data.levels.length - 1; depth++) {
			const key = first.p.slice(0, depth + 1).join("/");
			await page.click(`.domain-row[data-key="${key}"]`);
			await until(page, (k) => document.querySelector(`.domain-row[data-key="${k}"]`)
				?.classList.contains("open"), key, `row ${key} open`);
		}
		const summaryEls = await elements(page);
		assert.ok(summaryEls < DOM_CAP, `${summaryEls} elements in the summary`);
		if (shots.large) {
			await page.screenshot({ path: shots.large, fullPage: true });
			console.log(`screenshot: ${shots.large}`);
		}
		await page.click(`.domain-row[data-key="${first.p.join("/")}"][data-leaf]`);
		await until(page, (n) => document.querySelectorAll("[data-node]").length === n, first.n,
			`the ${first.n} nodes of the first domain`);
		// A search matching thousands: a page of them, under the element cap.
		await searchFor(page, "dgx");
		await until(page, () => document.querySelectorAll("[data-node]").length > 100, null, "many nodes");
		const searchEls = await elements(page);
		assert.ok(searchEls < DOM_CAP, `${searchEls} elements with ${PAGE_NODES} nodes sent`);
		assert.match(await page.textContent("#pager"), /page 1 of \d+/);
		// One node by name.
		const name = wide.data.nodes[7][0];
		await searchFor(page, name);
		await until(page, (n) => document.querySelectorAll("[data-node]").length === 1 &&
			document.querySelector("[data-node]").dataset.node === n, name, `node ${name}`);
		assert.deepEqual(page.errors, []);
		await page.close();
		console.log(`ok large: ${summaryEls} elements in the summary, ${searchEls} with a page of nodes`);
	} catch (e) {
		console.log(t.log().slice(-4000));
		throw e;
	} finally {
		stopTroupe(t);
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

/* ---- main ----------------------------------------------------------------------- */

const args = process.argv.slice(2);
const shots = {};
for (const [flag, key] of [["--screenshot", "known"], ["--screenshot-large", "large"]]) {
	const i = args.indexOf(flag);
	if (i >= 0) shots[key] = path.resolve(args.splice(i, 2)[1]);
}
const screenshot = shots.known;
const cases = args.length ? args : ["known", "large"];
const browser = await chromium.launch({ executablePath: chromiumPath,
	args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
let failed = false;
try {
	for (const c of cases) {
		try {
			if (c === "known") await known(browser, screenshot);
			else if (c === "large") await large(browser, shots);
			else throw new Error(`no case ${c} (known, large)`);
		} catch (e) {
			failed = true;
			console.log(`FAIL ${c}: ${e.stack || e}`);
		}
	}
} finally {
	await browser.close();
}
process.exit(failed ? 1 : 0);
