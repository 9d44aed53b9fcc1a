/* troupe's dashboard: polls dashboard.json every POLL_MS and draws it.
 *
 * What it draws (the JSON's fields are in docs/reference.md):
 *  - every node sent as a tile of its GPUs, islands apart, each GPU free,
 *    unhealthy, held by a pod troupe does not know, or in its holder's colour
 *    (given the first time the page meets it, so a gang keeps its colour
 *    across polls);
 *    nodes under a header per network domain, which folds;
 *  - above DASH_FULL_NODES nodes the server sends domain summaries only: the
 *    page shows them as a tree folded at the coarsest level, and a click on a
 *    finest domain (or a search) asks for that domain's nodes;
 *  - gangs, with a click showing one and its nodes; queue shares and filter
 *    and bind latency over the polls this page has made (it keeps HISTORY).
 *
 * The page never holds more than about DOM_CAP elements: node tiles stop at
 * NODE_BUDGET elements, domain rows at DOMAIN_ROWS, legend entries at
 * LEGEND_MAX (tests/browser/test_dashboard.mjs checks it at 5,000 nodes).
 * Plain ES2017, no framework, nothing fetched but dashboard.json.
 */
"use strict";

const POLL_MS = 2000;
const FETCH_TIMEOUT_MS = 10000;
const HISTORY = 300;            /* polls kept: 10 minutes */
const LAT_WINDOW = 15;          /* latency is shown over the last 30 s */
const NODE_BUDGET = 10000;      /* elements for node tiles */
const DOMAIN_ROWS = 300;
const LEGEND_MAX = 24;
const DOM_CAP = 15000;          /* stated cap, checked by the browser test */

const state = { q: "", domain: "", page: 0, gang: "", collapsed: new Set(), expanded: new Set(), data: null,
	history: [], timer: 0, seq: 0 };
const $ = (id) => document.getElementById(id);

function esc(s) {
	return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
		'"': "&quot;", "'": "&#39;" })[c]);
}

/* A holder's colour, fixed the first time the page meets it: the first
 * PALETTE.length holders take a qualitative palette's colours (chosen to be
 * told apart, on the dark background too), later ones hues a golden angle
 * apart. A hash of the name gave two pods of the screenshot one pink. The
 * table is forgotten past COLOURS_MAX names, so a page left open on 5,000
 * nodes stays small. */
const PALETTE = ["#4e9bd4", "#e8853a", "#d95f8e", "#5cc46a", "#9b7fe0", "#e0c341",
	"#3fc1c0", "#c8553d", "#8fb339", "#c27bd1", "#a0703a", "#e6a27a"];
const COLOURS_MAX = 20000;
const colours = new Map();
function colour(name) {
	let c = colours.get(name);
	if (!c) {
		if (colours.size >= COLOURS_MAX)
			colours.clear();
		const i = colours.size;
		c = i < PALETTE.length ? PALETTE[i]
			: `hsl(${Math.floor((i * 137.508 + 200) % 360)},${58 + (i % 3) * 8}%,` +
			  `${50 + (i % 2) * 8}%)`;
		colours.set(name, c);
	}
	return c;
}

function fmtS(s) {
	if (s == null) return "–";
	if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
	if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + " ms";
	return s.toFixed(2) + " s";
}

/* ---- polling ------------------------------------------------------------ */

function url() {
	const p = new URLSearchParams();
	if (state.q) p.set("q", state.q);
	if (state.domain) p.set("domain", state.domain);
	if (state.page) p.set("page", String(state.page));
	const s = p.toString();
	return "dashboard.json" + (s ? "?" + s : "");
}

async function poll() {
	clearTimeout(state.timer);
	/* A hidden tab asks nothing; it polls again once shown. */
	if (document.hidden) return;
	const seq = ++state.seq;
	const headers = {};
	const token = sessionStorage.getItem("troupe-token");
	if (token) headers.Authorization = "Bearer " + token;
	const abort = new AbortController();
	const late = setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
	try {
		const r = await fetch(url(), { headers, cache: "no-store", signal: abort.signal });
		if (seq !== state.seq) return;          /* a newer poll started */
		if (r.status === 401 || r.status === 403) {
			$("auth").hidden = false;
			status(`${r.status}: a token is needed`, true);
		} else if (!r.ok) {
			status(`HTTP ${r.status}`, true);
		} else {
			const d = await r.json();
			if (seq !== state.seq) return;
			$("auth").hidden = true;
			state.data = d;
			remember(d);
			render(d);
			status("live " + new Date().toLocaleTimeString(), false);
		}
	} catch (e) {
		if (seq === state.seq) status("troupe unreachable", true);
	}
	clearTimeout(late);
	if (seq === state.seq) state.timer = setTimeout(poll, POLL_MS);
}

function status(text, bad) {
	const s = $("status");
	s.textContent = text;
	s.className = "status" + (bad ? " bad" : "");
}

/* ---- history: queue shares and latency over the polls ------------------- */

/* The p-quantile of the requests between two polls' bucket counts. */
function quantile(bounds, now, before, p) {
	const d = now.map((c, i) => c - (before ? before[i] : 0));
	const total = d.reduce((a, b) => a + b, 0);
	if (total <= 0) return null;
	let cum = 0;
	for (let i = 0; i < d.length; i++) {
		if (cum + d[i] >= p * total) {
			if (i >= bounds.length) return bounds[bounds.length - 1];
			const lo = i ? bounds[i - 1] : 0, hi = bounds[i];
			return lo + (hi - lo) * ((p * total - cum) / d[i]);
		}
		cum += d[i];
	}
	return bounds[bounds.length - 1];
}

function remember(d) {
	const shares = {};
	for (const q of d.queues || []) shares[q.n] = q.share;
	const L = d.latency || {};
	const raw = { filter: L.filter && L.filter.b, bind: L.bind && L.bind.b };
	/* Latency over the last LAT_WINDOW polls (since troupe started, until
	 * the page has made that many). */
	const h = state.history;
	const base = h.length ? h[Math.max(0, h.length - LAT_WINDOW)].raw : null;
	const lat = {};
	for (const v of ["filter", "bind"]) {
		if (!raw[v]) continue;
		const before = base && base[v];
		const sum = (xs) => (xs ? xs.reduce((a, b) => a + b, 0) : 0);
		lat[v] = { p50: quantile(L.bounds, raw[v], before, 0.5),
			p99: quantile(L.bounds, raw[v], before, 0.99), n: sum(raw[v]) - sum(before) };
	}
	h.push({ t: Date.now(), shares, lat, raw });
	if (h.length > HISTORY) h.shift();
}

/* ---- drawing -------------------------------------------------------------- */

function render(d) {
	const t = d.totals;
	$("totals").innerHTML = `<b data-k="nodes">${t.nodes}</b> nodes · <b data-k="gpus">${t.gpus}</b>` +
		` GPUs · <b data-k="used">${t.used}</b> used · <b data-k="free">${t.free}</b> free` +
		(t.unhealthy ? ` · ${t.unhealthy} unhealthy` : "") +
		(t.unavailable ? ` · ${t.unavailable} nodes not ready or cordoned` : "") +
		(d.truncated ? " · <b>reply truncated</b>" : "");
	renderLegend(d);
	renderNodes(d);
	renderGangs(d);
	renderShares();
	renderLatency();
}

function renderLegend(d) {
	const owners = (d.owners || []).slice().sort((a, b) => b.g - a.g);
	let html = owners.slice(0, LEGEND_MAX).map((o) =>
		`<span data-owner="${esc(o.n)}" title="${esc(o.k)} ${esc(o.n)}, queue ${esc(o.q)}: ${o.g} GPUs">` +
		`<i style="background:${colour(o.n)}"></i>${esc(o.n)}</span>`).join("");
	if (owners.length > LEGEND_MAX) html += `<span class="muted">${owners.length - LEGEND_MAX} more</span>`;
	html += `<span class="muted"><i style="background:var(--free)"></i>free</span>` +
		`<span class="muted"><i class="g planned" style="background-color:#888"></i>planned</span>` +
		`<span class="muted"><i style="background:var(--unknown)"></i>unknown pod</span>` +
		`<span class="muted"><i style="background:var(--unhealthy)"></i>unhealthy</span>`;
	$("legend").innerHTML = html;
}

function domainPath(d, i) {
	const dom = d.domains[i];
	return dom ? dom.p.join("/") : "";
}

function domainLabel(d, i) {
	const dom = d.domains[i];
	if (!dom) return "(domain not sent)";
	return dom.p.map((v, k) => v ? `${esc(shortKey(d.levels[k]))} <b>${esc(v)}</b>` : "").filter(Boolean)
		.join(" · ") || "(no domain labels)";
}

function shortKey(k) {
	return k.replace(/^.*\//, "");
}

function summary(dom) {
	return `${dom.n} nodes · ${dom.u}/${dom.g} GPUs used · ${dom.f} free` +
		(dom.x ? ` · ${dom.x} off` : "");
}

/* One node: ["name", domain, flags, topo, [codes]] */
function nodeHtml(d, n, owners) {
	const [name, , flags, topo, codes] = n;
	const isl = topo >= 0 && d.topos[topo] ? d.topos[topo].isl : null;
	let gpus = "";
	let used = 0;
	for (let i = 0; i < codes.length; i++) {
		const c = codes[i];
		const edge = i && isl && isl[i] !== isl[i - 1] ? " isl" : "";
		if (c >= 0) {
			const o = owners[c];
			used++;
			gpus += `<i class="g${edge} ${o.k === "planned" ? "planned" : o.k === "held" ? "held" : ""}"` +
				` style="background-color:${colour(o.n)}" data-state="used" data-owner="${esc(o.n)}"` +
				` title="GPU ${i}: ${esc(o.k)} ${esc(o.n)}"></i>`;
		} else {
			const cls = c === -2 ? "bad" : c === -3 ? "unk" : "";
			const st = c === -2 ? "unhealthy" : c === -3 ? "unknown" : "free";
			if (c === -3) used++;
			gpus += `<i class="g${edge} ${cls}" data-state="${st}" title="GPU ${i}: ${st}"></i>`;
		}
	}
	const off = flags & 3 ? " off" : "";
	const why = (flags & 1 ? " not ready" : "") + (flags & 2 ? " cordoned" : "");
	const hit = state.q && name.toLowerCase().includes(state.q.toLowerCase()) ? " hit" : "";
	const src = topo >= 0 && d.topos[topo] ? `, ${d.topos[topo].src}, best link ${d.topos[topo].best}` : "";
	return `<div class="node${off}${hit}" data-node="${esc(name)}" title="${esc(name)}: ${used}/${codes.length} GPUs used${why}${esc(src)}">` +
		`<span class="nm">${esc(name)}</span><div class="gpus">${gpus}</div></div>`;
}

/* The domains (sorted by path) as a tree of their path's prefixes, each
 * summing its domains' counts. */
function domainTree(d) {
	const root = { kids: new Map() };
	for (const dom of d.domains) {
		let at = root;
		dom.p.forEach((v, depth) => {
			const key = dom.p.slice(0, depth + 1).join("/");
			if (!at.kids.has(v))
				at.kids.set(v, { key, value: v, depth, n: 0, g: 0, u: 0, f: 0, x: 0, kids: new Map() });
			at = at.kids.get(v);
			for (const k of ["n", "g", "u", "f", "x"]) at[k] += dom[k];
		});
	}
	return root;
}

function domainTreeHtml(d) {
	const levels = d.levels.length;
	let rows = "", count = 0, left = 0;
	const walk = (node) => {
		for (const kid of node.kids.values()) {
			if (count >= DOMAIN_ROWS) { left++; continue; }
			count++;
			const leaf = kid.depth === levels - 1;
			const open = state.expanded.has(kid.key);
			const pct = kid.g ? Math.round(100 * kid.u / kid.g) : 0;
			rows += `<div class="domain-row${open ? " open" : ""}" data-key="${esc(kid.key)}"${leaf ? " data-leaf" : ""}` +
				` style="padding-left:${4 + 16 * kid.depth}px"><span>${leaf ? "" : open ? "▾ " : "▸ "}` +
				`${esc(shortKey(d.levels[kid.depth]))} <b>${esc(kid.value || "(none)")}</b> ` +
				`<span class="muted">${kid.n} nodes${kid.x ? ", " + kid.x + " off" : ""}</span></span>` +
				`<span class="bar"><i style="width:${pct}%"></i></span><span>${kid.u}/${kid.g} used</span></div>`;
			if (open && !leaf) walk(kid);
		}
	};
	walk(domainTree(d));
	if (left) rows += `<div class="more">${left} more rows: fold some, or search</div>`;
	return rows;
}

function renderNodes(d) {
	const owners = d.owners || [];
	const filtered = state.q || state.domain;
	let scope = d.mode === "summary" && !filtered ? `${d.totals.nodes} nodes in ${d.domains.length} domains: pick one, or search` :
		filtered ? `${d.matched} nodes match` : `${d.nodes.length} nodes`;
	if (state.domain) scope += ` in ${esc(state.domain)} <a href="#" id="all-domains">all domains</a>`;
	$("scope").innerHTML = scope;
	const all = $("all-domains");
	if (all) all.onclick = (e) => { e.preventDefault(); state.domain = ""; state.page = 0; poll(); };
	renderPager(d);
	/* Summary: the domains as a tree, coarse to fine, folded: a level's
	 * groups open on a click, a finest domain's click asks for its nodes. */
	if (d.mode === "summary" && !filtered) {
		$("domains").innerHTML = domainTreeHtml(d);
		$("nodes").innerHTML = "";
		for (const row of $("domains").querySelectorAll(".domain-row"))
			row.onclick = () => {
				const key = row.dataset.key;
				if (row.dataset.leaf != null) {
					state.domain = key;
					state.page = 0;
					poll();
				} else {
					if (state.expanded.has(key)) state.expanded.delete(key); else state.expanded.add(key);
					render(state.data);
				}
			};
		return;
	}
	$("domains").innerHTML = "";
	/* Nodes, under a header per domain (they come sorted by domain). */
	let html = "", budget = NODE_BUDGET, last = -1, shown = 0, folded = 0, open = false;
	for (const n of d.nodes) {
		if (n[1] !== last) {
			if (open) html += "</div>";
			open = false;
			last = n[1];
			const path = domainPath(d, last);
			const dom = d.domains[last];
			const fold = state.collapsed.has(path);
			if (budget < 2) break;
			html += `<div class="domain${fold ? " collapsed" : ""}" data-path="${esc(path)}">${domainLabel(d, last)}` +
				(dom ? ` <span class="muted">${summary(dom)}</span>` : "") + "</div>";
			budget -= 1;
			if (!fold) {
				html += `<div class="group">`;
				open = true;
				budget -= 1;
			}
		}
		if (!open) { folded++; continue; }
		const cost = 3 + n[4].length;
		if (budget < cost) break;
		budget -= cost;
		shown++;
		html += nodeHtml(d, n, owners);
	}
	if (open) html += "</div>";
	const hidden = d.nodes.length - shown - folded;
	if (hidden > 0)
		html += `<div class="more">${hidden} more nodes not drawn (element cap): search or fold domains</div>`;
	$("nodes").innerHTML = html;
	for (const h of $("nodes").querySelectorAll(".domain"))
		h.onclick = () => {
			const p = h.dataset.path;
			if (state.collapsed.has(p)) state.collapsed.delete(p); else state.collapsed.add(p);
			render(state.data);
		};
}

function renderPager(d) {
	const p = $("pager");
	if (!d.pages || d.pages <= 1) { p.innerHTML = ""; return; }
	p.innerHTML = `<button id="prev">‹</button> page ${d.page + 1} of ${d.pages} <button id="next">›</button>`;
	$("prev").onclick = () => { if (state.page > 0) { state.page--; poll(); } };
	$("next").onclick = () => { if (state.page + 1 < d.pages) { state.page++; poll(); } };
}

function renderGangs(d) {
	const c = d.gangCounts || {};
	$("gang-counts").textContent = `${c.waiting || 0} waiting · ${(c.planned || 0) + (c.binding || 0)} planned · ` +
		`${c.bound || 0} bound · ${c.pending || 0} pending`;
	const rows = (d.gangs || []).map((g) =>
		`<tr class="row${g.n === state.gang ? " sel" : ""}" data-gang="${esc(g.n)}">` +
		`<td><i class="dot" style="display:inline-block;width:8px;height:8px;border-radius:2px;background:${colour(g.n)}"></i> ${esc(g.n)}</td>` +
		`<td><span class="st st-${esc(g.st)}">${esc(g.st)}${g.pos ? " #" + g.pos : ""}</span></td>` +
		`<td>${g.bound}/${g.exist}${g.quorum ? " of " + g.quorum : ""}</td>` +
		`<td>${g.gpus != null ? g.gpus : g.held != null ? g.held : ""}</td><td>${esc(g.q || "")}</td></tr>`).join("");
	const more = (c.all || 0) - (d.gangs || []).length;
	$("gangs").tBodies[0].innerHTML = rows + (more > 0 ? `<tr><td colspan="5" class="muted">${more} more gangs</td></tr>` : "");
	for (const tr of $("gangs").tBodies[0].querySelectorAll("tr.row"))
		tr.onclick = () => selectGang(tr.dataset.gang);
	renderGangDetail(d);
}

function selectGang(name) {
	if (state.gang === name) {
		state.gang = "";
		state.q = "";
	} else {
		state.gang = name;
		state.q = name;
	}
	$("search").value = state.q;
	state.domain = "";
	state.page = 0;
	poll();
}

function renderGangDetail(d) {
	const el = $("gang-detail");
	const g = (d.gangs || []).find((x) => x.n === state.gang);
	if (!state.gang) { el.hidden = true; return; }
	el.hidden = false;
	if (!g) { el.innerHTML = `<b>${esc(state.gang)}</b>: not listed now`; return; }
	let html = `<b data-k="gang">${esc(g.n)}</b> <span class="st st-${esc(g.st)}" data-k="state">${esc(g.st)}</span><br>` +
		`members: ${g.exist} exist, ${g.bound} bound${g.quorum ? ", quorum " + g.quorum : ""}` +
		(g.held != null ? `; they hold ${g.held} GPUs` : "");
	if (g.q != null) {
		html += `<br>queue ${esc(g.q)} (share ${(g.share * 100).toFixed(1)}%)` +
			(g.pos ? `, #${g.pos} in the fair order` : "") +
			`<br>asks ${g.need} members, ${g.gpus} GPUs; priority ${g.prio}` +
			(g.wait ? `; waiting ${g.wait.toFixed(0)} s` : "") +
			(g.left ? `; plan expires in ${g.left.toFixed(0)} s` : "") +
			(g.parked ? `; ${g.parked} binds parked` : "") +
			(g.holds ? `; ${g.holds} sets held for it` : "");
		if (g.reason) html += `<div class="reason">${esc(g.reason)}</div>`;
		if (g.slots && g.slots.length) {
			html += `<div>plan:</div>` + g.slots.map((s) =>
				`<div>· <a href="#" data-node-link="${esc(s[0])}">${esc(s[0])}</a> GPUs ${esc(s[1])}` +
				`${s[3] ? " (claimed)" : " (open)"}</div>`).join("") +
				(g.slotsMore ? `<div class="muted">${g.slotsMore} more places</div>` : "");
		}
	}
	el.innerHTML = html;
	for (const a of el.querySelectorAll("a[data-node-link]"))
		a.onclick = (e) => { e.preventDefault(); search(a.dataset.nodeLink); };
}

/* A line chart of <series> ({name: [values]}) onto <canvas>. */
function chart(canvas, series, fmt) {
	const ctx = canvas.getContext("2d");
	const w = canvas.width, h = canvas.height;
	ctx.clearRect(0, 0, w, h);
	let max = 0;
	for (const k in series) for (const v of series[k]) if (v != null && v > max) max = v;
	if (max <= 0) max = 1;
	ctx.fillStyle = "#8892a0";
	ctx.font = "10px sans-serif";
	ctx.fillText(fmt(max), 4, 10);
	const h0 = state.history[0], h1 = state.history[state.history.length - 1];
	if (h0 && h1 && h1.t > h0.t) {
		const span = (h1.t - h0.t) / 1000;
		const text = span < 120 ? `last ${Math.round(span)} s` : `last ${Math.round(span / 60)} min`;
		ctx.fillText(text, w - ctx.measureText(text).width - 4, 10);
	}
	for (const k in series) {
		const vs = series[k];
		ctx.strokeStyle = colour(k);
		ctx.lineWidth = 1.5;
		ctx.beginPath();
		let pen = false;
		vs.forEach((v, i) => {
			if (v == null) { pen = false; return; }
			const x = vs.length > 1 ? (i / (vs.length - 1)) * w : 0;
			const y = h - 2 - (v / max) * (h - 14);
			if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
			pen = true;
		});
		ctx.stroke();
	}
}

function renderShares() {
	const series = {};
	const names = new Set();
	for (const p of state.history) for (const k in p.shares) names.add(k);
	for (const k of names) series[k] = state.history.map((p) => (k in p.shares ? p.shares[k] : null));
	chart($("shares"), series, (v) => (v * 100).toFixed(0) + "%");
	const last = state.history.length ? state.history[state.history.length - 1].shares : {};
	$("share-legend").innerHTML = [...names].slice(0, LEGEND_MAX).map((k) =>
		`<span data-queue="${esc(k)}"><i style="background:${colour(k)}"></i>${esc(k)} ${last[k] != null ? (last[k] * 100).toFixed(1) + "%" : ""}</span>`).join("");
}

function renderLatency() {
	const last = state.history.length ? state.history[state.history.length - 1].lat : {};
	let html = "";
	for (const v of ["filter", "bind"]) {
		const l = last[v];
		html += `<span>${v}</span><span data-verb="${v}">${l && l.n > 0 ? `${fmtS(l.p50)} / ${fmtS(l.p99)} (${l.n} request${l.n === 1 ? "" : "s"})` : "no requests"}</span>`;
	}
	$("latency").innerHTML = html;
	chart($("lat-chart"), {
		"filter p99": state.history.map((p) => (p.lat.filter ? p.lat.filter.p99 : null)),
		"bind p99": state.history.map((p) => (p.lat.bind ? p.lat.bind.p99 : null)),
	}, fmtS);
}

function search(q) {
	state.q = q;
	state.gang = (state.data && (state.data.gangs || []).some((g) => g.n === q)) ? q : "";
	state.domain = "";              /* a search spans every domain */
	state.page = 0;
	$("search").value = q;
	poll();
}

let typing = 0;
$("search").addEventListener("input", (e) => {
	clearTimeout(typing);
	typing = setTimeout(() => search(e.target.value.trim()), 250);
});
$("legend").addEventListener("click", (e) => {
	const s = e.target.closest("[data-owner]");
	if (s) search(s.dataset.owner);
});
$("auth").onsubmit = (e) => {
	e.preventDefault();
	sessionStorage.setItem("troupe-token", $("token").value.trim());
	poll();
};
document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
window.troupeDashboard = { state, DOM_CAP, NODE_BUDGET };
poll();
