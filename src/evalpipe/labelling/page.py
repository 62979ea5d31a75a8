"""The labelling page: one HTML document with its script, no external asset (works offline).

Keys: 0 / 1 / 2 grade the candidate (not relevant / partly / fully), s skips, u or Backspace
undoes the last verdict. The time per label is measured in the page, from the moment the item
is drawn to the key press. Text is put in with textContent only (a unit's code is never HTML).
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>evalpipe label</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:75em;color:#222}
#query{font-size:1.3em;font-weight:600;margin:.3em 0 1em}
.meta{color:#555;font-size:.9em}
pre{background:#f6f8fa;border:1px solid #ddd;padding:.8em;overflow:auto;max-height:32em;white-space:pre-wrap}
#context{background:#fffbe6}
mark{background:#ffe066}
button{font-size:1em;margin-right:.4em;padding:.3em .8em}
#status.error{color:#b00020;font-weight:600}
#done{display:none;font-size:1.2em;color:#1b5e20}
</style></head>
<body>
<div class="meta"><span id="progress"></span> · <span id="timing"></span>
  · assessor <b id="assessor"></b></div>
<div id="item">
  <div class="meta">case <code id="case"></code> · tier <span id="tier"></span></div>
  <div id="query"></div>
  <div class="meta">candidate <code id="candidate"></code> · <span id="kind"></span>
    · <span id="path"></span></div>
  <div id="expected" class="meta"></div>
  <pre id="context"></pre>
  <pre id="text"></pre>
  <div>
    <button data-grade="0">0 not relevant</button><button data-grade="1">1 partly</button>
    <button data-grade="2">2 relevant</button><button id="skip">s skip</button>
    <button id="undo">u undo</button>
  </div>
</div>
<div id="done">Every item of this batch is judged (or skipped). Merge with evalpipe merge-judgements.</div>
<p id="status"></p>
<script>
const token = new URLSearchParams(location.search).get("token");
let current = null, shownAt = 0, busy = false;
function words(q){return q.toLowerCase().split(/[^a-z0-9_]+/).filter(w => w.length >= 3);}
function highlight(el, text, query){
  el.textContent = "";
  const ws = words(query);
  if(!ws.length){el.textContent = text; return;}
  const alts = ws.map(w => w.replace(/[.*+?^${}()|[\\]\\\\]/g, "\\\\$&")).join("|");
  const re = new RegExp("(" + alts + ")", "gi");
  let last = 0, m;
  while((m = re.exec(text)) !== null){
    el.appendChild(document.createTextNode(text.slice(last, m.index)));
    const mk = document.createElement("mark"); mk.textContent = m[0]; el.appendChild(mk);
    last = m.index + m[0].length;
  }
  el.appendChild(document.createTextNode(text.slice(last)));
}
function draw(state){
  const p = state.progress;
  document.getElementById("progress").textContent =
    `${p.judged} judged, ${p.skipped} skipped of ${p.total}`;
  document.getElementById("timing").textContent =
    p.median_seconds === null ? "no label timed yet" : `median ${p.median_seconds.toFixed(1)} s per label`;
  document.getElementById("assessor").textContent = p.assessor;
  current = state.item;
  document.getElementById("item").style.display = current ? "" : "none";
  document.getElementById("done").style.display = current ? "none" : "block";
  if(!current) return;
  for(const f of ["case_id:case", "tier", "candidate", "kind", "path"]){
    const [src, dst] = f.includes(":") ? f.split(":") : [f, f];
    document.getElementById(dst).textContent = current[src];
  }
  document.getElementById("query").textContent = current.query;
  document.getElementById("expected").textContent = state.blind ? "" :
    "listed answers: " + (current.expected.join(", ") || "(none)");
  document.getElementById("context").textContent = current.context;
  highlight(document.getElementById("text"), current.text || "(no text)", current.query);
  document.body.dataset.index = current.index;
  document.body.dataset.candidate = current.candidate;
  shownAt = performance.now();
}
async function call(path, body){
  const r = await fetch(path + "?token=" + encodeURIComponent(token), body === undefined ? {} :
    {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const data = await r.json();
  if(!r.ok) throw new Error(data.error || r.statusText);
  return data;
}
async function act(path, body){
  if(busy) return; busy = true;
  const status = document.getElementById("status");
  try{
    const state = await call(path, body);
    status.className = ""; status.textContent = state.saved || "";
    document.body.dataset.saved = String(Number(document.body.dataset.saved || 0) + 1);
    draw(state);
  }catch(e){ status.className = "error"; status.textContent = "not saved: " + e.message; }
  finally{ busy = false; }
}
function grade(g){
  if(!current) return;
  act("api/label", {case_id: current.case_id, candidate: current.candidate, grade: g,
                     seconds: (performance.now() - shownAt) / 1000});
}
document.querySelectorAll("button[data-grade]")
  .forEach(b => b.onclick = () => grade(Number(b.dataset.grade)));
document.getElementById("skip").onclick = () => grade(null);
document.getElementById("undo").onclick = () => act("api/undo", {});
document.addEventListener("keydown", e => {
  if(e.ctrlKey || e.metaKey || e.altKey) return;
  if(["0","1","2"].includes(e.key)) grade(Number(e.key));
  else if(e.key === "s") grade(null);
  else if(e.key === "u" || e.key === "Backspace"){ e.preventDefault(); act("api/undo", {}); }
});
call("api/state").then(s => { draw(s); document.body.dataset.ready = "1"; })
  .catch(e => { document.getElementById("status").textContent = e.message; });
</script>
</body></html>
"""
