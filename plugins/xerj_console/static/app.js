// The xerj console: a hash-routed single page over xerj's own HTTP API, read with the caller's own key.
// Every piece of data reaches the page through textContent (el() below), never through innerHTML.

const PRE = "\uE000";   // highlight tags: private-use characters no document carries by accident
const POST = "\uE001";
const RATIONALE_DETECTORS = new Set(["samedir", "sequence", "sharedterm"]);
const MAP_EDGE_CAP = 10000;  // the search API's result window
const DISPLAY_LIMIT = 200000;  // characters of a record's text the reader draws (a 20 MB note stays responsive)
const PALETTE = ["#2f6fb5", "#d9822b", "#3c9d5d", "#b5442f", "#7a4fb5", "#2b9bb5", "#b5a02f", "#b52f8a", "#555"];

const REVIEW_PAGE = 20;
const state = window.xerjConsole = { page: null, session: null, csrf: null, map: null, search: null, reader: null, corpus: null,
                                     review: null, guest: null, keys: null, mapWorker: null };

// The shared indices of a guest session (its brain's edges index left out), else null.
function guestOf() { return state.session && state.session.guest ? state.session.guest : null; }
function guestDatasets() {
  const guest = guestOf();
  return guest ? guest.indices.filter((name) => !name.startsWith(".xerj-memory-")) : [];
}

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

// Each navigation is a generation; a page still awaiting data when the next one starts must not draw over it.
let routeGen = 0;
class Stale extends Error {}
window.addEventListener("unhandledrejection", (event) => { if (event.reason instanceof Stale) event.preventDefault(); });

async function api(method, path, body) {
  const gen = routeGen;
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
  if (gen !== routeGen) throw new Stale("the page moved on");  // its caller's page is no longer shown
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
  const guest = guestOf();
  const nav = document.getElementById("nav");
  nav.replaceChildren(...(guest
    ? [el("a", { href: hashFor("guest", { share: guest.share }), text: "Shared" }),
       el("a", { href: "#/search", text: "Search" }),
       el("a", { href: hashFor("map", { brain: guest.brain }), text: "Map" })]
    : [el("a", { href: "#/corpus", text: "Corpus" }),
       el("a", { href: "#/search", text: "Search" }),
       el("a", { href: "#/map", text: "Map" }),
       el("a", { href: "#/review", text: "Review" })]));
  const mode = document.getElementById("mode");
  const who = document.getElementById("who");
  who.replaceChildren();
  if (session.mode === "open") {
    mode.textContent = "open mode: no sign-in, every caller is the superuser";
  } else if (guest) {
    mode.textContent = `guest of a shared brain (${guest.brain}), read-only; the share expires ${fmtTime(guest.share_expires_at)}`;
    who.append(el("button", { type: "button", "data-testid": "sign-out", text: "Leave", onclick: signOut }));
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
  const guest = guestOf();
  await api("DELETE", "/_xerj-console/api/session");
  state.csrf = null;
  await loadSession();
  location.hash = guest ? hashFor("guest", { share: guest.share }) : "#/signin";
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

// -- guest view ----------------------------------------------------------------------------------

// A share link (#/guest?share=ID): the passcode is exchanged for a read-only session cookie; the page then
// shows exactly the shared indices and the share's expiry. Nothing on a guest's pages writes.
async function guestPage(params) {
  const share = params.get("share") || (guestOf() || {}).share || "";
  const guest = guestOf();
  if (!guest || guest.share !== share) {
    if (!share) { show(el("h1", { text: "Shared brain" }), el("p", { text: "Open the link you were given: it names its share." })); return; }
    const input = el("input", { type: "password", name: "passcode", autocomplete: "off", placeholder: "passcode", "data-testid": "passcode" });
    const message = el("p", { class: "error" });
    const form = el("form", { class: "inline", "data-testid": "guest-sign-in" }, input, el("button", { type: "submit", text: "Open" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const answer = await api("POST", "/_xerj-console/api/session", { share, passcode: input.value.trim() });
      if (answer.status !== 200) { message.textContent = `The share refused: ${reasonOf(answer)}`; return; }
      state.session = answer.body;
      state.csrf = answer.body.csrf || null;
      renderHeader();
      await guestPage(new URLSearchParams({ share }));
    });
    state.guest = { share, signed_in: false };
    show(el("h1", { text: "Shared brain" }),
         el("p", { class: "muted", text: "Someone shared a brain with you, read-only. Enter the passcode they gave you." }),
         form, message);
    return;
  }
  const datasets = guestDatasets();
  state.guest = { share: guest.share, brain: guest.brain, indices: guest.indices, expires_at: guest.share_expires_at,
                  session_expires: state.session.expires, signed_in: true, ready: true };
  show(el("h1", { text: `Shared brain: ${guest.brain}` }),
       el("p", { "data-testid": "guest-expiry", text: `Read-only. This share expires ${fmtTime(guest.share_expires_at)}; this visit lasts until ${fmtTime(state.session.expires * 1000)}.` }),
       el("div", { class: "cards" }, datasets.map((name) => el("div", { class: "card", "data-testid": "shared-index" },
         el("h3", { text: name }),
         el("div", {}, el("a", { href: hashFor("search", { index: name }), text: "search it" })),
         el("div", {}, el("a", { href: hashFor("map", { brain: guest.brain }), text: `map of ${guest.brain}` }))))));
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
  // The catalog counts documents; files are the datasets' file cards, counted where the key may read them.
  const files = await Promise.all(found.datasets.map(async (d) => {
    const counted = await api("POST", `/${encodeURIComponent(d.dataset)}/_count`, { query: { term: { kind: "file" } } });
    return counted.status === 200 ? counted.body.count : null;
  }));
  const cards = found.datasets.map((d, i) => {
    const brains = Array.isArray(d.brains) ? d.brains : [];
    return el("div", { class: "card", "data-testid": "dataset-card" },
      el("h3", { text: d.dataset }),
      el("div", { text: `${files[i] ?? "?"} files, ${d.documents ?? "?"} documents` }),
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
  const guest = guestOf();
  // A guest reads no catalog: its datasets are the share's indices, its brain the share's.
  const datasets = guest ? guestDatasets().map((name) => ({ dataset: name, brains: [guest.brain] }))
                         : ((await catalog()).datasets || []);
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
    // The box reads a query string: words, "phrases", gra*, -excluded, field:value, AND/OR/NOT.
    query: { bool: { must: [{ query_string: { query: q, fields: ["title", "text"] } }], filter } },
    highlight: { fields: { text: {}, title: { number_of_fragments: 0 } }, pre_tags: [PRE], post_tags: [POST],
                 fragment_size: 160, number_of_fragments: 2 },
  };
  const scope = index ? encodeURIComponent(index) : guest ? datasets.map((d) => encodeURIComponent(d.dataset)).join(",") : "";
  const target = scope ? `/${scope}/_search` : "/_search";
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

// -- the as_of time slider ------------------------------------------------------------------------

// The span of a brain's history: its earliest edge's valid_at to now (one min aggregation on the edges index).
async function brainSpan(brain) {
  const now = Date.now();
  const answer = await api("POST", `/${encodeURIComponent(`.xerj-memory-${brain}-edges`)}/_search`,
                           { size: 0, query: { exists: { field: "src" } }, aggs: { first: { min: { field: "valid_at" } } } });
  const first = answer.status === 200 && answer.body.aggregations ? answer.body.aggregations.first.value : null;
  return { min: Math.floor(first && first < now ? first : now - 365 * 86400000), max: now };
}

// A range input over the brain's history; moving it re-opens the page at that instant (as_of in the hash),
// so the page re-asks ego / the edges with as_of. At the right end it is "now" and as_of is dropped.
function timeSlider(span, asOf, onPick) {
  const max = Math.max(span.max, asOf || 0);
  const value = asOf ? Math.max(span.min, Math.min(max, asOf)) : max;
  // step "any": an instant is not snapped to a grid, so a slider set to T asks about T itself.
  const input = el("input", { type: "range", min: span.min, max, step: "any", value, "data-testid": "as-of",
                              "aria-label": "as of" });
  const label = el("span", { class: "muted", "data-testid": "as-of-label", text: asOf ? `as of ${fmtTime(asOf)}` : "as of now" });
  input.addEventListener("input", () => { label.textContent = `as of ${fmtTime(Number(input.value))}`; });
  input.addEventListener("change", () => {
    const picked = Math.floor(Number(input.value));
    onPick(picked >= max - 1000 ? null : picked);
  });
  const now = el("button", { type: "button", "data-testid": "as-of-now", text: "now", onclick: () => onPick(null) });
  return el("div", { class: "slider" }, el("span", { text: "time " }), input, label, asOf ? now : null);
}

function parseAsOf(params) {
  const raw = params.get("as_of");
  const value = raw === null ? NaN : Number(raw);
  return Number.isFinite(value) && value > 0 ? Math.floor(value) : null;
}

// A file card (kind: file) carries no text: its sections do. The sections of ``paths``, in file order.
async function sectionsOf(index, paths, size) {
  const answer = await api("POST", `/${index.split(",").map(encodeURIComponent).join(",")}/_search`, {
    size, sort: [{ ordinal: "asc" }], _source: ["ax_path", "text", "ordinal"],
    query: { bool: { filter: [{ terms: { ax_path: paths } }], must_not: [{ term: { kind: "file" } }] } } });
  return answer.status === 200 ? answer.body.hits.hits.map((hit) => hit._source || {}) : [];
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

async function linksPanel(brain, id, index, asOf) {
  const panel = el("div", { class: "links", "data-testid": "links" }, el("h2", { text: `Links in ${brain}` }));
  // sections: a note's links sit on its sections, so a file's record lists them too
  const query = new URLSearchParams({ node: id, hops: "1", direction: "both", include_evidence: "true",
    sections: "true" });
  if (asOf) query.set("as_of", String(asOf));
  const span = await brainSpan(brain);
  panel.append(timeSlider(span, asOf, (picked) => { location.hash = hashFor("reader", { index, id, brain, as_of: picked }); }));
  const answer = await api("GET", `/_graph/${encodeURIComponent(brain)}/ego?${query}`);
  if (answer.status !== 200) { panel.append(failure("The brain's links", answer)); state.reader.links = "refused"; return panel; }
  const edges = answer.body.edges || [];
  state.reader.links = edges.length;
  state.reader.edges = edges.map((e) => ({ edge_id: e.edge_id, src: e.src, dst: e.dst, type: e.type, trust: e.trust }));
  if (!edges.length) { panel.append(el("p", { class: "muted", text: "The brain records no links for this record." })); return panel; }
  const groups = new Map();
  for (const edge of edges) {
    if (!groups.has(edge.type)) groups.set(edge.type, []);
    groups.get(edge.type).push(edge);
  }
  for (const [type, group] of groups) {
    panel.append(el("h3", { "data-testid": "link-group", text: `${type} (${group.length})` }));
    for (const edge of group) {
      const outgoing = edge.direction ? edge.direction === "out" : edge.src === id;
      const other = outgoing ? edge.dst : edge.src;
      const mine = outgoing ? edge.src : edge.dst;  // this record, or the section of it the link sits on
      panel.append(el("div", { class: "link", "data-testid": "link", "data-edge-id": edge.edge_id },
        el("div", {}, el("span", { text: outgoing ? "→ " : "← " }),
          el("a", { href: hashFor("reader", { index, id: other, brain, as_of: asOf }), text: other }),
          mine !== id ? el("span", { class: "muted", "data-testid": "link-section",
            text: ` (${mine.startsWith(id + "#") ? mine.slice(id.length) : mine})` }) : null),
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
  const asOf = parseAsOf(params);
  state.reader = { index, id, brain, as_of: asOf, found: null, links: null };
  if (!index || !id) { show(el("h1", { text: "Reader" }), el("p", { text: "Open a record from search or the corpus." })); return; }
  show(el("p", { class: "muted", text: "Loading…" }));
  // An ids query (not _mget, not GET _doc): the read every caller can be granted, a share's guest included,
  // and ids with a slash (note sections) travel in the body rather than the path.
  const answer = await api("POST", `/${encodeURIComponent(index)}/_search`, { size: 1, query: { ids: { values: [id] } } });
  let doc;
  const hit = answer.status === 200 ? answer.body.hits.hits[0] : null;
  if (answer.status !== 200) {
    doc = el("div", { class: "doc" }, failure(`The record [${id}]`, answer));
  } else if (!hit) {
    state.reader.found = false;
    doc = el("div", { class: "doc", "data-testid": "not-found" }, el("h1", { text: "No such record" }),
             el("p", { text: `[${id}] is not in [${index}].` }));
  } else {
    let src = hit._source || {};
    if (src.kind === "file" && !src.text && src.ax_path) {
      const sections = await sectionsOf(index, [src.ax_path], 1000);
      if (sections.length) src = { ...src, text: sections.map((section) => section.text || "").join("\n\n") };
    }
    state.reader.found = true;
    doc = el("div", { class: "doc", "data-testid": "record" },
      el("h1", { "data-testid": "record-title", text: String(src.title || src.section || id) }),
      el("div", { class: "muted", text: `${index} · ${id}${src.kind ? " · " + src.kind : ""}` }),
      ...renderBody(src));
  }
  const side = brain ? await linksPanel(brain, id, index, asOf)
                     : el("div", { class: "links" }, el("p", { class: "muted", text: "No brain given: add &brain= to see links." }));
  show(el("div", { class: "reader" }, doc, side));
  state.reader.ready = true;
}

// -- review queue --------------------------------------------------------------------------------

async function brainList(title, page) {
  const found = await catalog();
  const brains = [...new Set((found.datasets || []).flatMap((d) => d.brains || []))];
  show(el("h1", { text: title }), brains.length
    ? el("ul", {}, brains.map((b) => el("li", {}, el("a", { href: hashFor(page, { brain: b }), text: b }))))
    : el("p", { text: "No brain yet: run  xerj brain <folder>" }));
}

function preview(node, src, index, brain) {
  const text = src ? String(src.text || "").replace(/\s+/g, " ").slice(0, 180) : "";
  return el("div", { class: "preview", "data-testid": "preview" },
    el("a", { href: hashFor("reader", { index, id: node, brain }), text: src && src.title ? `${src.title}` : node }),
    el("div", { class: "muted", text: node }),
    src ? el("div", { class: "excerpt", text: text || "(no text)" })
        : el("div", { class: "muted", text: "no record of this name in the brain's notes" }));
}

function decisionText(last) {
  return last && last.approved !== undefined
    ? `approved ${last.approved}, rejected ${last.rejected}${last.not_found ? `, not found ${last.not_found}` : ""} (by ${last.reviewed_by})` : "";
}

// One queue of claims awaiting a person: a row per item (its own head and body), approve or reject one, the
// selected ones or the whole page, an optional note, posted to ``target`` ({approve, reject, note}) with the
// caller's own session. Keys: j/k move, a/r decide the current one, x selects it, A/R decide the selection
// (or the page when nothing is selected). After a decision the page reloads and shows the answer.
function reviewQueue({ title, intro, items, target, last, reload, tools, pager, empty, extra }) {
  const selected = new Set();
  let current = 0;
  const note = el("input", { type: "text", name: "note", placeholder: "review note (optional)", "data-testid": "review-note" });
  const message = el("p", { "data-testid": "review-result", class: "muted", text: decisionText(last) });
  const decide = async (approve, reject) => {
    if (!approve.length && !reject.length) return;
    const body = { approve, reject };
    if (note.value.trim()) body.note = note.value.trim();
    const result = await api("POST", target, body);
    if (result.status !== 200) { message.replaceChildren(failure("The decision", result)); state.review.last = { status: result.status }; return; }
    await reload(result.body);
  };
  const rows = items.map((item) => {
    const box = el("input", { type: "checkbox", "data-testid": "select", "aria-label": "select" });
    box.addEventListener("change", () => { if (box.checked) selected.add(item.id); else selected.delete(item.id); });
    return el("div", { class: "review-item", "data-testid": "review-item", "data-edge-id": item.id, tabindex: "-1" },
      el("div", { class: "review-head" }, box, ...item.head,
        el("button", { type: "button", "data-testid": "approve", text: "Approve", onclick: () => decide([item.id], []) }),
        el("button", { type: "button", "data-testid": "reject", text: "Reject", onclick: () => decide([], [item.id]) })),
      ...item.body);
  });
  const focusRow = (i) => {
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach((row, j) => row.classList.toggle("current", j === current));
    if (rows[current]) rows[current].focus({ preventScroll: false });
    state.review.current = items[current] ? items[current].id : null;
  };
  const chosen = () => (selected.size ? [...selected] : items.map((item) => item.id));
  const toolbar = el("div", { class: "toolbar" }, ...tools,
    el("button", { type: "button", "data-testid": "approve-selected", text: "Approve selected (or page) [A]", onclick: () => decide(chosen(), []) }),
    el("button", { type: "button", "data-testid": "reject-selected", text: "Reject selected (or page) [R]", onclick: () => decide([], chosen()) }),
    note);
  show(el("h1", { text: title }), el("p", { class: "muted", text: `${intro} Keys: j/k move, a approve, r reject, x select, A/R the selection or the page.` }),
       toolbar, message,
       items.length ? el("div", { "data-testid": "review-queue" }, rows) : el("p", { "data-testid": "review-empty", text: empty }),
       pager);
  state.keys = (event) => {
    if (event.target && ["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName) && event.target.type !== "checkbox") return;
    const item = items[current];
    if (event.key === "j") focusRow(current + 1);
    else if (event.key === "k") focusRow(current - 1);
    else if (event.key === "x" && rows[current]) { const box = rows[current].querySelector("input"); box.checked = !box.checked; box.dispatchEvent(new Event("change")); }
    else if (event.key === "a" && item) decide([item.id], []);
    else if (event.key === "r" && item) decide([], [item.id]);
    else if (event.key === "A") decide(chosen(), []);
    else if (event.key === "R") decide([], chosen());
    else return;
    event.preventDefault();
  };
  state.review = { ...extra, items: items.map((item) => item.id), last, ready: true };
  if (rows.length) focusRow(0);
}

function pagerFor(page, params, from, shown, total, what) {
  return el("div", {},
    from > 0 ? el("a", { href: hashFor(page, { ...params, from: Math.max(0, from - REVIEW_PAGE) }), text: "← previous " }) : null,
    el("span", { class: "muted", text: ` ${total} ${what}${shown ? `, ${from + 1}–${from + shown}` : ""} ` }),
    from + REVIEW_PAGE < total ? el("a", { href: hashFor(page, { ...params, from: from + REVIEW_PAGE }), text: " next →" }) : null);
}

// Detected edges, least confident first (the _review route's own order), each with its evidence and both ends'
// previews; or, with ?ns=, a memory namespace's memories not yet approved (newest first).
async function reviewPage(params, last = null) {
  if (guestOf()) {
    show(el("h1", { text: "Review" }), el("p", { "data-testid": "read-only", text: "A shared brain is read-only: there is nothing to review here." }));
    return;
  }
  const brain = params.get("brain") || "";
  const ns = params.get("ns") || "";
  if (ns) { await memoryReviewPage(ns, params, last); return; }
  if (!brain) {
    await brainList("Review", "review");
    const box = el("input", { type: "text", name: "ns", placeholder: "memory namespace", "data-testid": "review-ns" });
    const form = el("form", { class: "inline" }, box, el("button", { type: "submit", text: "Review its memories" }));
    form.addEventListener("submit", (event) => { event.preventDefault(); location.hash = hashFor("review", { ns: box.value.trim() }); });
    document.getElementById("page").append(el("h2", { text: "Memories" }), form);
    return;
  }
  const from = Math.max(0, parseInt(params.get("from") || "0", 10) || 0);
  const type = params.get("type") || "";
  state.review = { brain, ready: false, last };
  show(el("h1", { text: `Review ${brain}` }), el("p", { class: "muted", text: "Loading the queue…" }));
  const query = new URLSearchParams({ state: "detected", size: String(REVIEW_PAGE), from: String(from) });
  if (type) query.set("type", type);
  const answer = await api("GET", `/_graph/${encodeURIComponent(brain)}/_review?${query}`);
  if (answer.status !== 200) { show(el("h1", { text: `Review ${brain}` }), failure("The review queue", answer)); state.review.ready = true; return; }
  const edges = answer.body.items || [];
  const overview = await api("GET", `/_graph/${encodeURIComponent(brain)}/overview`);
  const nodesIndex = overview.status === 200 ? overview.body.nodes_index : null;
  const sources = new Map();
  if (nodesIndex && edges.length) {
    const ids = [...new Set(edges.flatMap((e) => [e.src, e.dst]))];
    const found = await api("POST", `/${nodesIndex.split(",").map(encodeURIComponent).join(",")}/_search`,
                            { size: ids.length, query: { ids: { values: ids } }, _source: ["title", "text", "ax_path"] });
    if (found.status === 200) for (const hit of found.body.hits.hits) sources.set(hit._id, hit._source || {});
    const files = [...sources.entries()].filter(([, src]) => !src.text && src.ax_path);
    if (files.length) {
      const opening = new Map();
      for (const section of await sectionsOf(nodesIndex, files.map(([, src]) => src.ax_path), 50 * files.length)) {
        if (!opening.has(section.ax_path) && section.text) opening.set(section.ax_path, section.text.replace(/^#{1,6} .*\n?/, ""));
      }
      for (const [id, src] of files) if (opening.has(src.ax_path)) sources.set(id, { ...src, text: opening.get(src.ax_path) });
    }
  }
  const readerIndex = nodesIndex ? nodesIndex.split(",")[0] : "";
  const types = overview.status === 200 ? (overview.body.types || []).map((t) => t.key) : [];
  const typePick = el("select", { "data-testid": "review-type", "aria-label": "edge type" },
    el("option", { value: "", text: "every type" }),
    ...types.map((t) => el("option", { value: t, text: t, selected: t === type })));
  typePick.addEventListener("change", () => { location.hash = hashFor("review", { brain, type: typePick.value }); });
  const total = answer.body.total ?? edges.length;
  reviewQueue({
    title: `Review ${brain}`, intro: "Detected claims awaiting a person, least confident first.",
    items: edges.map((edge) => ({ id: edge.edge_id,
      head: [el("strong", { text: ` ${edge.type} ` }),
             el("span", { class: "badge", text: `confidence: ${edge.confidence ?? "?"}` }),
             el("span", { class: "badge", text: edge.detector || "" }),
             el("span", { class: "badge", text: `trust: ${edge.trust}` })],
      body: [evidenceOf(edge),
             el("div", { class: "ends" }, preview(edge.src, sources.get(edge.src), readerIndex, brain),
                el("div", { class: "arrow", text: "→" }), preview(edge.dst, sources.get(edge.dst), readerIndex, brain))] })),
    target: `/_graph/${encodeURIComponent(brain)}/_review`, last,
    reload: (answered) => reviewPage(params, answered), tools: [typePick],
    pager: pagerFor("review", { brain, type }, from, edges.length, total, "awaiting review"),
    empty: "Nothing awaits review in this brain.", extra: { brain, total, previews: sources.size } });
}

// A namespace's memories not yet approved, newest first; a rejection forgets the memory and lays a tombstone
// (POST /_memory/{ns}/_review), so the same text stored again is refused.
async function memoryReviewPage(ns, params, last) {
  const from = Math.max(0, parseInt(params.get("from") || "0", 10) || 0);
  state.review = { ns, ready: false, last };
  show(el("h1", { text: `Review memories of ${ns}` }), el("p", { class: "muted", text: "Loading the memories…" }));
  const answer = await api("POST", `/${encodeURIComponent(`.xerj-memory-${ns}`)}/_search`, {
    from, size: REVIEW_PAGE, track_total_hits: true, sort: [{ stored_at: "desc" }],
    query: { bool: { must: [{ exists: { field: "text" } }],
                     must_not: [{ terms: { trust: ["approved", "rejected"] } }, { exists: { field: "forgotten_at" } }] } } });
  if (answer.status !== 200) { show(el("h1", { text: `Review memories of ${ns}` }), failure("The memories", answer)); state.review.ready = true; return; }
  const hits = answer.body.hits.hits;
  const total = answer.body.hits.total ? answer.body.hits.total.value : hits.length;
  reviewQueue({
    title: `Review memories of ${ns}`, intro: "Memories stored and neither approved nor forgotten yet, newest first. Rejecting one forgets it and lays a tombstone that refuses its text from then on.",
    items: hits.map((hit) => {
      const src = hit._source || {};
      return { id: hit._id,
        head: [el("strong", { text: " memory " }), el("span", { class: "badge", text: `trust: ${src.trust || "asserted"}` }),
               el("span", { class: "badge", text: `stored ${fmtTime(src.stored_at)}` })],
        body: [el("blockquote", { "data-testid": "memory-text", text: String(src.text || "").slice(0, 2000) }),
               el("a", { href: hashFor("reader", { index: `.xerj-memory-${ns}`, id: hit._id }), text: "open" })] };
    }),
    target: `/_memory/${encodeURIComponent(ns)}/_review`, last,
    reload: (answered) => reviewPage(params, answered), tools: [],
    pager: pagerFor("review", { ns }, from, hits.length, total, "memories not yet approved"),
    empty: "No memory of this namespace awaits review.", extra: { ns, total } });
}

// -- map -----------------------------------------------------------------------------------------

const layoutCache = new Map();

function layoutKey(brain, asOf, edgeCount, total) { return `xerj-layout:${brain}:${asOf || "now"}:${edgeCount}:${total}`; }

function cachedLayout(key) {
  if (layoutCache.has(key)) return layoutCache.get(key);
  try { const raw = sessionStorage.getItem(key); if (raw) return JSON.parse(raw); } catch { /* storage unavailable */ }
  return null;
}

function storeLayout(key, graph) {
  const positions = {};
  graph.forEachNode((node, attrs) => { positions[node] = [Math.round(attrs.x * 100) / 100, Math.round(attrs.y * 100) / 100]; });
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

// A cached layout's positions, when it covers every node; true if applied.
function applyCached(graph, key) {
  const cached = key ? cachedLayout(key) : null;
  if (!cached || Object.keys(cached).length !== graph.order) return false;
  graph.forEachNode((node) => { const p = cached[node] || [0, 0]; graph.mergeNodeAttributes(node, { x: p[0], y: p[1] }); });
  return true;
}

// A deterministic start (a sunflower spiral) so the same brain lays out the same way; drawn at once.
function spiral(graph) {
  let i = 0;
  const n = graph.order || 1;
  graph.forEachNode((node) => {
    const angle = i * 2.399963, radius = Math.sqrt(i / n) * 100;
    graph.mergeNodeAttributes(node, { x: radius * Math.cos(angle), y: radius * Math.sin(angle) });
    i++;
  });
}

// ForceAtlas2 sweeps: fewer on big graphs (the same in a worker and on the page, so one brain lays out the same
// way either way; on the page they block it, which is why the worker is the default).
function iterationsFor(order) { return order > 5000 ? 15 : order > 1500 ? 25 : 100; }

export function layOutInline(graph) {
  const fa2 = graphologyLibrary.layoutForceAtlas2;
  fa2.assign(graph, { iterations: iterationsFor(graph.order),
                      settings: { ...fa2.inferSettings(graph), barnesHutOptimize: graph.order > 1000 } });
}

// The layout in a Web Worker (layout-worker.js): resolves with the positions applied to ``graph``.
function layOutInWorker(graph) {
  return new Promise((resolve, reject) => {
    const index = new Map();
    const xy = new Float64Array(2 * graph.order);
    graph.forEachNode((node, attrs) => { const i = index.size; index.set(node, i); xy[2 * i] = attrs.x; xy[2 * i + 1] = attrs.y; });
    const src = new Int32Array(graph.size), dst = new Int32Array(graph.size);
    let e = 0;
    graph.forEachEdge((_key, _attrs, s, d) => { src[e] = index.get(s); dst[e] = index.get(d); e++; });
    let worker;
    try { worker = new Worker("/_xerj-console/layout-worker.js"); } catch (error) { reject(error); return; }
    state.mapWorker = worker;
    worker.onerror = (event) => { worker.terminate(); reject(new Error(event.message || "layout worker failed")); };
    worker.onmessage = (event) => {
      worker.terminate();
      if (state.mapWorker === worker) state.mapWorker = null;
      const out = event.data.xy;
      graph.forEachNode((node) => { const i = index.get(node); graph.mergeNodeAttributes(node, { x: out[2 * i], y: out[2 * i + 1] }); });
      resolve(event.data.ms);
    };
    worker.postMessage({ order: graph.order, src, dst, xy, iterations: iterationsFor(graph.order) },
                       [src.buffer, dst.buffer, xy.buffer]);
  });
}

function sigmaClass() {
  return typeof Sigma === "function" ? Sigma : (Sigma.Sigma || Sigma.default);
}

// The live edges at ``asOf`` (valid by then and not yet invalidated), or now.
function edgesQuery(asOf) {
  if (!asOf) return { bool: { must: [{ exists: { field: "src" } }], must_not: [{ exists: { field: "invalid_at" } }] } };
  return { bool: { must: [{ exists: { field: "src" } }], filter: [{ range: { valid_at: { lte: asOf } } }],
                   must_not: [{ range: { invalid_at: { lte: asOf } } }] } };
}

async function mapPage(params) {
  const brain = params.get("brain") || "";
  if (!brain) { await brainList("Map", "map"); return; }
  const asOf = parseAsOf(params);
  const inline = params.get("layout") === "inline";
  const started = performance.now();
  const token = {};
  state.map = { brain, as_of: asOf, ready: false, token };
  show(el("h1", { text: `Map of ${brain}` }), el("p", { class: "muted", text: "Loading the brain…" }));
  const edgesIndex = `.xerj-memory-${brain}-edges`;
  // The three reads are independent: asked at once, answered in one round trip's time.
  const [overview, answer, span] = await Promise.all([
    api("GET", `/_graph/${encodeURIComponent(brain)}/overview${asOf ? `?as_of=${asOf}` : ""}`),
    api("POST", `/${encodeURIComponent(edgesIndex)}/_search`, {
      size: MAP_EDGE_CAP, track_total_hits: true, query: edgesQuery(asOf), _source: ["src", "dst", "type", "trust"] }),
    brainSpan(brain)]);
  const ov = overview.body || {};
  if (overview.status !== 200 && ov.exists !== false) { show(el("h1", { text: `Map of ${brain}` }), failure("The brain's overview", overview)); state.map.ready = true; return; }
  if (!ov.exists) { show(el("h1", { text: `Map of ${brain}` }), el("p", { text: `There is no brain [${brain}].` })); state.map.ready = true; return; }
  if (answer.status !== 200) { show(el("h1", { text: `Map of ${brain}` }), failure("The brain's edges", answer)); state.map.ready = true; return; }
  const fetched = performance.now();
  const edges = answer.body.hits.hits.map((hit) => hit._source).filter((s) => s && s.src && s.dst);
  const total = answer.body.hits.total ? answer.body.hits.total.value : edges.length;
  if (!edges.length) {
    show(el("h1", { text: `Map of ${brain}` }),
         timeSlider(span, asOf, (picked) => { location.hash = hashFor("map", { brain, as_of: picked }); }),
         el("p", { "data-testid": "map-empty", text: `The brain [${brain}] has no live edges${asOf ? ` as of ${fmtTime(asOf)}` : ""} (${ov.edges ? ov.edges.total : 0} recorded in all).` }));
    state.map = { brain, as_of: asOf, token, nodes: 0, edges: 0, total_edges: total, edge_keys: [], ready: true, layout_done: true };
    return;
  }
  const types = (ov.types || []).map((t) => t.key);
  const colour = (type) => PALETTE[Math.max(0, types.indexOf(type)) % PALETTE.length];
  const graph = buildGraph(edges, colour);
  // The overview's hubs keep their labels at every zoom: the brain's landmarks.
  const hubs = new Set([...((ov.hubs || {}).out || []), ...((ov.hubs || {}).in || [])].map((h) => h.key));
  for (const hub of hubs) if (graph.hasNode(hub)) graph.mergeNodeAttributes(hub, { forceLabel: true, hub: true });
  const built = performance.now();
  const key = layoutKey(brain, asOf, edges.length, total);
  const fromCache = applyCached(graph, key);
  if (!fromCache) {
    spiral(graph);
    if (inline) { layOutInline(graph); storeLayout(key, graph); }
  }
  const container = el("div", { id: "map", "data-testid": "map" });
  const focus = el("input", { type: "search", placeholder: "find a node", "data-testid": "map-focus" });
  const typeBoxes = types.map((t) => el("label", {}, el("input", { type: "checkbox", checked: true, value: t }), el("i", { style: `background:${colour(t)}` }), ` ${t} `));
  const trustPick = el("select", { "data-testid": "trust-filter" }, ["any", "detected", "asserted", "approved"].map((t) => el("option", { value: t, text: `trust: ${t}` })));
  const capped = total > edges.length;
  const layoutNote = el("span", { class: "muted", "data-testid": "map-layout",
                                  text: fromCache ? "layout: cached" : inline ? "layout: computed" : "layout: computing…" });
  show(el("h1", { text: `Map of ${brain}` }),
       el("p", { class: "muted", "data-testid": "map-counts",
                 text: `${graph.order} nodes, ${graph.size} edges drawn${capped ? ` (capped at ${MAP_EDGE_CAP} of ${total} edges)` : ""}; ${ov.nodes ? ov.nodes.total : "?"} records in the brain${asOf ? `; as of ${fmtTime(asOf)}` : ""}` }),
       timeSlider(span, asOf, (picked) => { location.hash = hashFor("map", { brain, as_of: picked }); }),
       el("div", { class: "legend" }, typeBoxes, trustPick, focus, layoutNote),
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
  renderer.on("clickNode", ({ node }) => { location.hash = hashFor("reader", { index: (ov.nodes_index || "").split(",")[0], id: node, brain, as_of: asOf }); });
  const drawn = performance.now();
  state.map = { brain, as_of: asOf, token, nodes: graph.order, edges: graph.size, total_edges: total, cap: MAP_EDGE_CAP, capped,
                hubs: graph.filterNodes((_node, attrs) => attrs.hub).length,
                edge_keys: edges.map((e) => `${e.src}|${e.type}|${e.dst}`),
                layout_cached: fromCache, layout: fromCache ? "cached" : inline ? "inline" : "pending",
                layout_done: fromCache || inline, fetch_ms: Math.round(fetched - started), build_ms: Math.round(built - fetched),
                render_ms: Math.round(drawn - started), ready: true, renderer };
  requestAnimationFrame(() => { if (state.map.token === token) state.map.painted_ms = Math.round(performance.now() - started); });
  if (fromCache || inline) { state.map.layout_ms = inline ? Math.round(drawn - fetched) : 0; return; }
  const settle = (how, label) => {
    if (state.map.token !== token) return;  // the page moved on
    storeLayout(key, graph);
    renderer.refresh();
    layoutNote.textContent = `layout: ${label}`;
    state.map.layout = how;
    state.map.layout_done = true;
    state.map.layout_ms = Math.round(performance.now() - drawn);
  };
  layOutInWorker(graph).then(() => settle("worker", "computed in a worker")).catch((error) => {
    if (state.map.token !== token) return;
    state.map.worker_error = String(error && error.message || error);
    layOutInline(graph);  // no worker (blocked or unsupported): the main thread does it, as before
    settle("page", "computed on the page (no worker)");
  });
}

// -- routing -------------------------------------------------------------------------------------

const PAGES = { corpus: corpusPage, search: searchPage, reader: readerPage, map: mapPage, signin: signInPage,
                review: reviewPage, guest: guestPage };

async function route() {
  routeGen++;
  const raw = location.hash.replace(/^#\/?/, "");
  const [name, qs] = raw.split("?");
  const params = new URLSearchParams(qs || "");
  let page = PAGES[name] ? name : "corpus";
  if (state.map && state.map.renderer) { state.map.renderer.kill(); state.map.renderer = null; }
  if (state.mapWorker) { state.mapWorker.terminate(); state.mapWorker = null; }
  state.keys = null;
  if (!state.session || (state.session.mode !== "open" && !state.session.signed_in)) {
    if (!state.session || !state.session.expired) await loadSession();
  }
  const signedIn = state.session.mode === "open" || state.session.signed_in;
  // A share link opens its own passcode page; anything else unsigned opens the key sign-in.
  if (page !== "guest" && !signedIn) { state.page = "signin"; signInPage(); return; }
  if (guestOf() && page === "corpus") page = "guest";
  state.page = page;
  try { await PAGES[page](params); }
  catch (error) {
    if (error instanceof Stale) return;
    show(el("p", { class: "error", "data-testid": "error", text: `The console failed: ${error}` })); }
}

document.addEventListener("keydown", (event) => { if (state.keys) state.keys(event); });
window.addEventListener("hashchange", route);
loadSession().then(route);
