// The map's layout off the main thread: ForceAtlas2 (graphology-library) over node indices and edge pairs.
// In: {order, src: Int32Array, dst: Int32Array, xy: Float64Array (start positions), iterations}.
// Out: {xy: Float64Array (final positions, x then y per node), ms}. The page stays interactive meanwhile.
// graphology-library's bundle also carries its GEXF/GraphML parsers, which touch the DOM's XML classes when
// the bundle loads; a worker has none, and the layout never parses XML, so inert stand-ins let it load.
for (const name of ["DOMParser", "Document", "XMLSerializer"]) if (!(name in self)) self[name] = function unavailableInWorker() {};
importScripts("/_xerj-console/vendor/graphology.umd.min.js", "/_xerj-console/vendor/graphology-library.min.js");

self.onmessage = (event) => {
  const started = performance.now();
  const { order, src, dst, xy, iterations } = event.data;
  const graph = new graphology.MultiGraph();
  for (let i = 0; i < order; i++) graph.addNode(i, { x: xy[2 * i], y: xy[2 * i + 1] });
  for (let e = 0; e < src.length; e++) graph.addEdge(src[e], dst[e]);
  const fa2 = graphologyLibrary.layoutForceAtlas2;
  fa2.assign(graph, { iterations, settings: { ...fa2.inferSettings(graph), barnesHutOptimize: order > 1000 } });
  const out = new Float64Array(2 * order);
  graph.forEachNode((node, attrs) => { const i = Number(node); out[2 * i] = attrs.x; out[2 * i + 1] = attrs.y; });
  self.postMessage({ xy: out, ms: performance.now() - started }, [out.buffer]);
};
