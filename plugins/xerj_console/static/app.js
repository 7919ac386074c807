// The xerj console: a hash-routed single page over xerj's own HTTP API, read with the caller's own key.
// Every piece of data reaches the page through textContent (el() below), never through innerHTML.

const PRE = "\uE000";   // highlight tags: private-use characters no document carries by accident
const POST = "\uE001";
const RATIONALE_DETECTORS = new Set(["samedir", "sequence", "sharedterm"]);
const MAP_EDGE_CAP = 10000;  // the search API's result window
const DISPLAY_LIMIT = 200000;  // characters of a record's text the reader draws (a 20 MB note stays responsive)
const PALETTE = ["#2f6fb5", "#d9822b", "#3c9d5d", "#b5442f", "#7a4fb5", "#2b9bb5", "#b5a02f", "#b52f8a", "#555"];

const state = window.xerjConsole = { page: null, session: null, csrf: null, map: null, search: null, reader: null, corpus: null };

// -- DOM -----------------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(...children) {
  const page = document.getElementById("page");
  page.replaceChildren(...children);
}

function hashFor(page, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) if (value !== undefined && value !== null && value !== "") query.set(key, value);
  const qs = query.toString();
  return `#/${page}${qs ? "?" + qs : ""}`;
}

function fmtTime(ms) {
  if (!ms) return "never";
  try { return new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC"; } catch { return String(ms); }
}

// -- the API -------------------------------------------------------------------------------------

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (state.csrf) headers["X-XERJ-CSRF"] = state.csrf;
  const response = await fetch(path, { method, headers, credentials: "same-origin",
                                       body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (response.status === 401 && !path.startsWith("/_xerj-console/")) {
    state.session = { signed_in: false, mode: "secured", expired: true };
    renderHeader();
  }
  return { status: response.status, body: data };
}

function reasonOf(answer) {
  const error = answer.body && answer.body.error;
  if (error && typeof error === "object") return String(error.reason || error.type || answer.status);
  return `HTTP ${answer.status}`;
}

// A refused panel names what was refused and the privilege that would grant it (from the 403's reason).
function refused(what, answer) {
  const reason = reasonOf(answer);
  const privilege = (reason.match(/index privileges \[([^\]]+)\]/) || [])[1];
  const indices = (reason.match(/on indices \[([^\]]+)\]/) || [])[1];
  return el("div", { class: "refused", "data-testid": "refused" },
    el("strong", { text: `${what}: refused` }),
    el("p", { text: privilege ? `This key lacks the [${privilege.split(",")[0]}] privilege on [${indices || "?"}].` : reason }),
    el("p", { class: "muted", text: "Refused is not empty: the links may exist, this key cannot read them." }));
}

function failure(what, answer) {
  if (answer.status === 403) return refused(what, answer);
  return el("p", { class: "error", "data-testid": "error", text: `${what}: ${reasonOf(answer)}` });
}

// -- header and sign-in --------------------------------------------------------------------------

function renderHeader() {
  const session = state.session || {};
  const nav = document.getElementById("nav");
  nav.replaceChildren(
    el("a", { href: "#/corpus", text: "Corpus" }),
    el("a", { href: "#/search", text: "Search" }),
    el("a", { href: "#/map", text: "Map" }));
  const mode = document.getElementById("mode");
  const who = document.getElementById("who");
  who.replaceChildren();
  if (session.mode === "open") {
    mode.textContent = "open mode: no sign-in, every caller is the superuser";
  } else if (session.signed_in) {
    const p = session.principal || {};
    mode.textContent = `signed in as ${p.name}${p.key_id ? " (key " + p.key_id + ")" : ""}`;
    who.append(el("button", { type: "button", "data-testid": "sign-out", text: "Sign out", onclick: signOut }));
  } else {
    mode.textContent = session.expired ? "session expired: sign in again" : "not signed in";
  }
}

async function loadSession() {
  const answer = await api("GET", "/_xerj-console/api/session");
  state.session = answer.body || { signed_in: false };
  state.csrf = state.session.csrf || null;
  renderHeader();
}

async function signOut() {
  await api("DELETE", "/_xerj-console/api/session");
  state.csrf = null;
  await loadSession();
  location.hash = "#/signin";
}

function signInPage() {
  const input = el("input", { type: "password", name: "api_key", autocomplete: "off", placeholder: "encoded API key (base64 of id:key)", "data-testid": "api-key" });
  const message = el("p", { class: "error" });
  const form = el("form", { class: "inline", "data-testid": "sign-in" },
    input, el("button", { type: "submit", text: "Sign in" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = await api("POST", "/_xerj-console/api/session", { api_key: input.value.trim() });
    if (answer.status !== 200) { message.textContent = `Sign-in refused: ${reasonOf(answer)}`; return; }
    state.session = answer.body;
    state.csrf = answer.body.csrf || null;
    renderHeader();
    location.hash = "#/corpus";
  });
  show(el("h1", { text: "Sign in" }),
       el("p", { class: "muted", text: "The key is exchanged for a session cookie bound to it; the console then reads with exactly that key's privileges." }),
       form, message);
}

// -- corpus --------------------------------------------------------------------------------------

async function catalog() {
  const answer = await api("POST", "/autoindex-catalog/_search", { size: 1000, query: { match_all: {} } });
  if (answer.status === 404) return { datasets: [], answer };
  if (answer.status !== 200) return { error: answer };
  const datasets = answer.body.hits.hits.map((hit) => hit._source || {}).filter((src) => src.kind === "dataset");
  return { datasets, answer };
}

async function corpusPage() {
  show(el("h1", { text: "Corpus" }), el("p", { class: "muted", text: "Loading the catalog…" }));
  const found = await catalog();
  if (found.error) { show(el("h1", { text: "Corpus" }), failure("The catalog", found.error)); return; }
  state.corpus = { datasets: found.datasets.map((d) => d.dataset) };
  if (!found.datasets.length) {
    show(el("h1", { text: "Corpus" }),
         el("div", { class: "empty", "data-testid": "empty-corpus" },
           el("p", { text: "Nothing is indexed on this node yet. Index a folder and open its brain:" }),
           el("pre", { class: "cmd", text: "xerj brain ~/notes" })));
    return;
  }
  const cards = found.datasets.map((d) => {
    const brains = Array.isArray(d.brains) ? d.brains : [];
    return el("div", { class: "card", "data-testid": "dataset-card" },
      el("h3", { text: d.dataset }),
      el("div", { text: `${d.documents ?? "?"} documents` }),
      el("div", { class: "muted", text: `from ${(d.roots || []).join(", ") || "?"}` }),
      el("div", { class: "muted", text: `last run ${fmtTime(d.updated_at)}` }),
      el("div", {}, ...brains.map((b) => el("a", { href: hashFor("map", { brain: b }), text: `brain ${b} ` }))),
      el("div", {}, el("a", { href: hashFor("search", { index: d.dataset }), text: "search this dataset" })));
  });
  show(el("h1", { text: "Corpus" }), el("div", { class: "cards" }, cards));
}

// -- search --------------------------------------------------------------------------------------

function marked(fragment) {
  // Split on the private-use tags the request asked for; every piece is a text node.
  const out = [];
  const parts = String(fragment).split(PRE);
  out.push(document.createTextNode(parts[0]));
  for (const part of parts.slice(1)) {
    const [inside, ...rest] = part.split(POST);
    out.push(el("mark", { text: inside }));
    out.push(document.createTextNode(rest.join("")));
  }
  return out;
}

async function searchPage(params) {
  const q = params.get("q") || "";
  const index = params.get("index") || "";
  const kind = params.get("kind") || "";
  const from = Math.max(0, parseInt(params.get("from") || "0", 10) || 0);
  const found = await catalog();
  const datasets = found.datasets || [];
  const brainOf = new Map(datasets.map((d) => [d.dataset, (d.brains || [])[0]]));
  const box = el("input", { type: "search", name: "q", value: q, placeholder: "search every index this key can read", "data-testid": "search-box" });
  const pick = el("select", { name: "index", "data-testid": "dataset-filter" },
    el("option", { value: "", text: "all datasets" }),
    ...datasets.map((d) => el("option", { value: d.dataset, text: d.dataset, selected: d.dataset === index })));
  const kindBox = el("input", { type: "text", name: "kind", value: kind, placeholder: "type (e.g. section)", "data-testid": "kind-filter" });
  const form = el("form", { class: "inline" }, box, pick, kindBox, el("button", { type: "submit", text: "Search" }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = hashFor("search", { q: box.value, index: pick.value, kind: kindBox.value });
  });
  const results = el("div", { "data-testid": "results" });
  show(el("h1", { text: "Search" }), form, results);
  if (!q) return;
  const filter = kind ? [{ match: { kind: { query: kind, operator: "and" } } }] : [];
  const body = {
    from, size: 10,
    query: { bool: { must: [{ multi_match: { query: q, fields: ["title", "text"] } }], filter } },
    highlight: { fields: { text: {}, title: { number_of_fragments: 0 } }, pre_tags: [PRE], post_tags: [POST],
                 fragment_size: 160, number_of_fragments: 2 },
  };
  const target = index ? `/${encodeURIComponent(index)}/_search` : "/_search";
  const answer = await api("POST", target, body);
  if (answer.status !== 200) { results.replaceChildren(failure("Search", answer)); return; }
  const hits = answer.body.hits.hits.filter((hit) => hit._index !== "autoindex-catalog");
  const total = answer.body.hits.total ? answer.body.hits.total.value : hits.length;
  state.search = { q, total, hits: hits.length, highlighted: hits.filter((h) => h.highlight).length };
  const rows = hits.map((hit) => {
    const src = hit._source || {};
    const hl = hit.highlight || {};
    const title = hl.title ? marked(hl.title[0]) : [String(src.title || src.ax_path || hit._id)];
    const snippets = (hl.text || []).map((f) => el("p", { class: "snippet", "data-testid": "snippet" }, marked(f)));
    const brain = brainOf.get(hit._index);
    return el("div", { class: "result", "data-testid": "result" },
      el("a", { href: hashFor("reader", { index: hit._index, id: hit._id, brain }) }, title),
      el("div", { class: "muted", text: `${hit._index} · ${src.kind || ""} · ${src.ax_path || hit._id}` }),
      snippets.length ? snippets : el("p", { class: "snippet", text: String(src.text || "").slice(0, 200) }));
  });
  const pager = el("div", {},
    from > 0 ? el("a", { href: hashFor("search", { q, index, kind, from: Math.max(0, from - 10) }), text: "← previous " }) : null,
    el("span", { class: "muted", text: ` ${total} results, ${from + 1}–${from + hits.length} ` }),
    from + 10 < total ? el("a", { href: hashFor("search", { q, index, kind, from: from + 10 }), text: " next →" }) : null);
  results.replaceChildren(...rows, pager);
}

// -- reader --------------------------------------------------------------------------------------

function renderBody(src) {
  const text = String(src.text ?? src.content ?? src.body ?? "");
  const clipped = text.length > DISPLAY_LIMIT;
  const shown = clipped ? text.slice(0, DISPLAY_LIMIT) : text;
  const body = el("div", { class: "body" });
  if (src.format === "markdown" || /^#{1,6} /m.test(shown)) {
    let paragraph = [];
    const flush = () => { if (paragraph.length) body.append(el("p", { text: paragraph.join("\n") })); paragraph = []; };
    for (const line of shown.split("\n")) {
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      if (heading) { flush(); body.append(el(`h${Math.min(6, heading[1].length + 1)}`, { text: heading[2] })); }
      else if (!line.trim()) flush();
      else paragraph.push(line);
    }
    flush();
  } else {
    body.append(el("p", { text: shown }));
  }
  if (clipped) body.append(el("p", { class: "muted", text: `… ${text.length - DISPLAY_LIMIT} more characters not drawn` }));
  const extras = [];
  for (const key of ["from", "to", "subject", "date", "page", "language"]) {
    if (src[key] !== undefined && typeof src[key] !== "object") extras.push(el("div", { class: "muted", text: `${key}: ${src[key]}` }));
  }
  for (const key of ["attachments", "symbols", "thread"]) {
    if (Array.isArray(src[key]) && src[key].length) {
      extras.push(el("div", {}, el("strong", { text: key }),
        el("ul", {}, src[key].slice(0, 200).map((item) => el("li", { text: typeof item === "object" ? (item.name || item.filename || JSON.stringify(item)) : item })))));
    }
  }
  return [...extras, body];
}

function evidenceOf(edge) {
  const evidence = edge.evidence;
  const detector = String(edge.detector || "").split("@")[0];
  if (!evidence || (typeof evidence === "object" && !evidence.quote)) {
    return el("p", { class: "noevidence", "data-testid": "no-evidence", text: "no evidence recorded — asserted, not detected" });
  }
  const quote = typeof evidence === "object" ? String(evidence.quote) : String(evidence);
  if (RATIONALE_DETECTORS.has(detector)) return el("p", { class: "why", "data-testid": "why", text: `WHY — ${quote}` });
  const where = typeof evidence === "object" && evidence.source
    ? `line at offset ${evidence.offset ?? 0} of ${evidence.source}` : "quoted line";
  return el("div", {}, el("blockquote", { "data-testid": "quote", text: `“${quote}”` }), el("div", { class: "muted", text: where }));
}

async function linksPanel(brain, id, index) {
  const panel = el("div", { class: "links", "data-testid": "links" }, el("h2", { text: `Links in ${brain}` }));
  const query = new URLSearchParams({ node: id, hops: "1", direction: "both", include_evidence: "true" });
  const answer = await api("GET", `/_graph/${encodeURIComponent(brain)}/ego?${query}`);
  if (answer.status !== 200) { panel.append(failure("The brain's links", answer)); state.reader.links = "refused"; return panel; }
  const edges = answer.body.edges || [];
  state.reader.links = edges.length;
  if (!edges.length) { panel.append(el("p", { class: "muted", text: "The brain records no links for this record." })); return panel; }
  const groups = new Map();
  for (const edge of edges) {
    if (!groups.has(edge.type)) groups.set(edge.type, []);
    groups.get(edge.type).push(edge);
  }
  for (const [type, group] of groups) {
    panel.append(el("h3", { "data-testid": "link-group", text: `${type} (${group.length})` }));
    for (const edge of group) {
      const outgoing = edge.direction !== "in" && edge.src === id;
      const other = outgoing ? edge.dst : edge.src;
      panel.append(el("div", { class: "link", "data-testid": "link" },
        el("div", {}, el("span", { text: outgoing ? "→ " : "← " }),
          el("a", { href: hashFor("reader", { index, id: other, brain }), text: other })),
        evidenceOf(edge),
        el("div", {}, el("span", { class: "badge", text: `trust: ${edge.trust || "?"}` }),
          el("span", { class: "badge", text: `confidence: ${edge.confidence ?? "?"}` }),
          edge.detector ? el("span", { class: "badge", text: edge.detector }) : null)));
    }
  }
  return panel;
}

async function readerPage(params) {
  const index = params.get("index") || "";
  const id = params.get("id") || "";
  const brain = params.get("brain") || "";
  state.reader = { index, id, brain, found: null, links: null };
  if (!index || !id) { show(el("h1", { text: "Reader" }), el("p", { text: "Open a record from search or the corpus." })); return; }
  show(el("p", { class: "muted", text: "Loading…" }));
  const answer = await api("POST", `/${encodeURIComponent(index)}/_mget`, { ids: [id] });
  let doc;
  if (answer.status !== 200) doc = el("div", { class: "doc" }, failure(`The record [${id}]`, answer));
  else {
    const found = (answer.body.docs || [])[0] || {};
    state.reader.found = !!found.found;
    if (!found.found) doc = el("div", { class: "doc", "data-testid": "not-found" }, el("h1", { text: "No such record" }),
                               el("p", { text: `[${id}] is not in [${index}].` }));
    else {
      const src = found._source || {};
      doc = el("div", { class: "doc", "data-testid": "record" },
        el("h1", { "data-testid": "record-title", text: String(src.title || src.section || id) }),
        el("div", { class: "muted", text: `${index} · ${id}${src.kind ? " · " + src.kind : ""}` }),
        ...renderBody(src));
    }
  }
  const side = brain ? await linksPanel(brain, id, index)
                     : el("div", { class: "links" }, el("p", { class: "muted", text: "No brain given: add &brain= to see links." }));
  show(el("div", { class: "reader" }, doc, side));
  state.reader.ready = true;
}

// -- map -----------------------------------------------------------------------------------------

const layoutCache = new Map();

function layoutKey(brain, overview, edgeCount) { return `xerj-layout:${brain}:${overview.as_of ? "" : ""}${edgeCount}:${overview.edges ? overview.edges.total : ""}`; }

function cachedLayout(key) {
  if (layoutCache.has(key)) return layoutCache.get(key);
  try { const raw = sessionStorage.getItem(key); if (raw) return JSON.parse(raw); } catch { /* storage unavailable */ }
  return null;
}

function storeLayout(key, positions) {
  layoutCache.set(key, positions);
  try { sessionStorage.setItem(key, JSON.stringify(positions)); } catch { /* too big for sessionStorage: memory only */ }
}

export function buildGraph(edges, colours) {
  const graph = new graphology.MultiDirectedGraph();
  for (const edge of edges) {
    for (const node of [edge.src, edge.dst]) if (!graph.hasNode(node)) graph.addNode(node, { label: node });
    graph.addDirectedEdge(edge.src, edge.dst, { type: "line", edgeType: edge.type, trust: edge.trust, color: colours(edge.type) });
  }
  graph.forEachNode((node) => graph.setNodeAttribute(node, "size", 2 + Math.sqrt(graph.degree(node)) * 1.6));
  return graph;
}

export function layOut(graph, key) {
  const cached = key ? cachedLayout(key) : null;
  if (cached && Object.keys(cached).length === graph.order) {
    graph.forEachNode((node) => { const p = cached[node] || [0, 0]; graph.mergeNodeAttributes(node, { x: p[0], y: p[1] }); });
    return true;
  }
  let i = 0;
  const n = graph.order || 1;
  graph.forEachNode((node) => {  // a deterministic start (a spiral) so the same brain lays out the same way
    const angle = i * 2.399963, radius = Math.sqrt(i / n) * 100;
    graph.mergeNodeAttributes(node, { x: radius * Math.cos(angle), y: radius * Math.sin(angle) });
    i++;
  });
  const fa2 = graphologyLibrary.layoutForceAtlas2;
  // Fewer sweeps on big graphs keep the first draw of a 2,000-node brain under 2 s (bench_console.py).
  const iterations = graph.order > 5000 ? 15 : graph.order > 1500 ? 25 : 100;
  fa2.assign(graph, { iterations, settings: { ...fa2.inferSettings(graph), barnesHutOptimize: graph.order > 1000 } });
  if (key) {
    const positions = {};
    graph.forEachNode((node, attrs) => { positions[node] = [Math.round(attrs.x * 100) / 100, Math.round(attrs.y * 100) / 100]; });
    storeLayout(key, positions);
  }
  return false;
}

function sigmaClass() {
  return typeof Sigma === "function" ? Sigma : (Sigma.Sigma || Sigma.default);
}

async function mapPage(params) {
  const brain = params.get("brain") || "";
  if (!brain) {
    const found = await catalog();
    const brains = [...new Set((found.datasets || []).flatMap((d) => d.brains || []))];
    show(el("h1", { text: "Map" }), brains.length
      ? el("ul", {}, brains.map((b) => el("li", {}, el("a", { href: hashFor("map", { brain: b }), text: b }))))
      : el("p", { text: "No brain yet: run  xerj brain <folder>" }));
    return;
  }
  const started = performance.now();
  state.map = { brain, ready: false };
  show(el("h1", { text: `Map of ${brain}` }), el("p", { class: "muted", text: "Loading the brain…" }));
  const overview = await api("GET", `/_graph/${encodeURIComponent(brain)}/overview`);
  if (overview.status !== 200) { show(el("h1", { text: `Map of ${brain}` }), failure("The brain's overview", overview)); state.map.ready = true; return; }
  const ov = overview.body;
  if (!ov.exists) { show(el("h1", { text: `Map of ${brain}` }), el("p", { text: `There is no brain [${brain}].` })); state.map.ready = true; return; }
  const edgesIndex = `.xerj-memory-${brain}-edges`;
  const answer = await api("POST", `/${encodeURIComponent(edgesIndex)}/_search`, {
    size: MAP_EDGE_CAP, track_total_hits: true,
    query: { bool: { must: [{ exists: { field: "src" } }], must_not: [{ exists: { field: "invalid_at" } }] } },
    _source: ["src", "dst", "type", "trust", "confidence"],
  });
  if (answer.status !== 200) { show(el("h1", { text: `Map of ${brain}` }), failure("The brain's edges", answer)); state.map.ready = true; return; }
  const edges = answer.body.hits.hits.map((hit) => hit._source).filter((s) => s && s.src && s.dst);
  const total = answer.body.hits.total ? answer.body.hits.total.value : edges.length;
  const types = (ov.types || []).map((t) => t.key);
  const colour = (type) => PALETTE[Math.max(0, types.indexOf(type)) % PALETTE.length];
  const graph = buildGraph(edges, colour);
  const key = layoutKey(brain, ov, edges.length);
  const fromCache = layOut(graph, key);
  const container = el("div", { id: "map", "data-testid": "map" });
  const focus = el("input", { type: "search", placeholder: "find a node", "data-testid": "map-focus" });
  const typeBoxes = types.map((t) => el("label", {}, el("input", { type: "checkbox", checked: true, value: t }), el("i", { style: `background:${colour(t)}` }), ` ${t} `));
  const trustPick = el("select", { "data-testid": "trust-filter" }, ["any", "detected", "asserted", "approved", "pending"].map((t) => el("option", { value: t, text: `trust: ${t}` })));
  const capped = total > edges.length;
  show(el("h1", { text: `Map of ${brain}` }),
       el("p", { class: "muted", "data-testid": "map-counts",
                 text: `${graph.order} nodes, ${graph.size} edges drawn${capped ? ` (capped at ${MAP_EDGE_CAP} of ${total} edges)` : ""}; ${ov.nodes ? ov.nodes.total : "?"} records in the brain` }),
       el("div", { class: "legend" }, typeBoxes, trustPick, focus),
       container);
  const Renderer = sigmaClass();
  const renderer = new Renderer(graph, container, { renderEdgeLabels: false, labelRenderedSizeThreshold: 8 });
  const applyFilters = () => {
    const on = new Set(typeBoxes.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value));
    const trust = trustPick.value;
    graph.forEachEdge((edgeKey, attrs) => graph.setEdgeAttribute(edgeKey, "hidden", !on.has(attrs.edgeType) || (trust !== "any" && attrs.trust !== trust)));
  };
  typeBoxes.forEach((l) => l.querySelector("input").addEventListener("change", applyFilters));
  trustPick.addEventListener("change", applyFilters);
  focus.addEventListener("change", () => {
    const needle = focus.value.toLowerCase();
    const hit = graph.findNode((node) => node.toLowerCase().includes(needle));
    if (!hit) return;
    graph.forEachNode((node) => graph.setNodeAttribute(node, "highlighted", node === hit));
    const pos = renderer.getNodeDisplayData(hit);
    if (pos) renderer.getCamera().animate({ x: pos.x, y: pos.y, ratio: 0.2 }, { duration: 300 });
  });
  renderer.on("clickNode", ({ node }) => { location.hash = hashFor("reader", { index: ov.nodes_index, id: node, brain }); });
  state.map = { brain, nodes: graph.order, edges: graph.size, total_edges: total, cap: MAP_EDGE_CAP, capped,
                layout_cached: fromCache, render_ms: Math.round(performance.now() - started), ready: true, renderer };
}

// -- routing -------------------------------------------------------------------------------------

const PAGES = { corpus: corpusPage, search: searchPage, reader: readerPage, map: mapPage, signin: signInPage };

async function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [name, qs] = raw.split("?");
  const params = new URLSearchParams(qs || "");
  const page = PAGES[name] ? name : "corpus";
  if (state.map && state.map.renderer) { state.map.renderer.kill(); state.map.renderer = null; }
  if (!state.session || (state.session.mode !== "open" && !state.session.signed_in)) {
    if (!state.session || !state.session.expired) await loadSession();
    if (state.session.mode !== "open" && !state.session.signed_in) { state.page = "signin"; signInPage(); return; }
  }
  state.page = page;
  try { await PAGES[page](params); }
  catch (error) { show(el("p", { class: "error", "data-testid": "error", text: `The console failed: ${error}` })); }
}

window.addEventListener("hashchange", route);
loadSession().then(route);
