// The canvas viewer: the run's blocks as a DAG laid out by the server, coloured by status and updated in place
// (classes and text only, no reload) every 1.5 s while the run is running; a block's details on click.
"use strict";

(() => {
  const { call, el, notify } = Canvas;
  const SVG = "http://www.w3.org/2000/svg";
  const POLL_MS = 1500;
  const runId = decodeURIComponent(window.location.pathname.split("/").filter(Boolean).pop());
  const $ = (id) => document.getElementById(id);
  let drawnIds = "";
  let lastView = null;
  let selected = null;
  let nodesById = new Map();

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  }

  function shorten(text, max) {
    return text.length > max ? `${text.slice(0, max - 1)}…` : text;
  }

  // The server's layout puts a block's column left to right, one per step of the longest path to it. Where those
  // columns are wider than the graph's box, they wrap as lines of text do: as many columns as fit side by side, then
  // the next ones below, so every block is in view without scrolling sideways (a long chain on a laptop, any canvas
  // of two steps or more on a phone). An arrow within a line points right; one to the next line points down.
  const WRAP_MARGIN = 16;
  const WRAP_GAP_X = 50;
  const WRAP_GAP_Y = 22;
  const WRAP_GAP_LINE = 44; // room for the arrows from one line to the next

  function fitted(view, room) {
    if (view.width <= room || !view.nodes.length) {
      return { wrapped: false, width: view.width, height: view.height, nodes: view.nodes, edges: view.edges };
    }
    const w = view.node_width;
    const h = view.node_height;
    const perLine = Math.max(1, Math.floor((room - 2 * WRAP_MARGIN + WRAP_GAP_X) / (w + WRAP_GAP_X)));
    const columns = new Map(); // the server's columns: the blocks drawn at one x, in their order down it
    for (const node of [...view.nodes].sort((a, b) => a.x - b.x || a.y - b.y)) {
      if (!columns.has(node.x)) columns.set(node.x, []);
      columns.get(node.x).push(node);
    }
    const lines = [];
    for (const [index, column] of [...columns.values()].entries()) {
      if (index % perLine === 0) lines.push([]);
      lines[lines.length - 1].push(column);
    }
    const at = new Map();
    let top = WRAP_MARGIN;
    for (const line of lines) {
      for (const [index, column] of line.entries()) {
        for (const [row, node] of column.entries()) {
          at.set(node.id, { x: WRAP_MARGIN + index * (w + WRAP_GAP_X), y: top + row * (h + WRAP_GAP_Y), line });
        }
      }
      top += Math.max(...line.map((column) => column.length)) * (h + WRAP_GAP_Y) - WRAP_GAP_Y + WRAP_GAP_LINE;
    }
    const width = 2 * WRAP_MARGIN + Math.min(perLine, columns.size) * (w + WRAP_GAP_X) - WRAP_GAP_X;
    const height = top - WRAP_GAP_LINE + WRAP_MARGIN;
    const nodes = view.nodes.map((node) => ({ ...node, x: at.get(node.id).x, y: at.get(node.id).y }));
    const edges = view.edges.map((edge) => {
      const source = at.get(edge.source_id);
      const target = at.get(edge.target_id);
      if (source.line === target.line) {
        const [x1, y1, x2, y2] = [source.x + w, source.y + h / 2, target.x, target.y + h / 2];
        const bend = Math.max(20, (x2 - x1) / 2);
        return { ...edge, path: `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2} ${y2}` };
      }
      const [x1, y1, x2, y2] = [source.x + w / 2, source.y + h, target.x + w / 2, target.y];
      const bend = Math.max(16, (y2 - y1) / 2);
      return { ...edge, path: `M ${x1} ${y1} C ${x1} ${y1 + bend}, ${x2} ${y2 - bend}, ${x2} ${y2}` };
    });
    return { wrapped: true, width, height, nodes, edges };
  }

  // What the drawing depends on: the blocks, whether their columns wrap, and how many fit on a line.
  function drawKey(view) {
    const laid = fitted(view, $("graph").clientWidth);
    return `${view.nodes.map((node) => node.id).join(",")}|${laid.wrapped ? laid.width : "columns"}`;
  }

  function draw(view) {
    const laid = fitted(view, $("graph").clientWidth);
    const width = Math.max(laid.width, 200);
    const height = Math.max(laid.height, 80);
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#b4bfd0" }));
    // A group of blocks, each a button named by its <title> (Tab to it, Enter or Space shows its details): not an
    // image, whose parts assistive technology would not reach.
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": "Canvas blocks",
      class: laid.wrapped ? "wrapped" : "columns" },
      svg("defs", {}, marker));
    for (const edge of laid.edges) {
      root.append(svg("path", { class: "edge", d: edge.path, "marker-end": "url(#arrow)", "data-source": edge.source_id, "data-target": edge.target_id }));
    }
    for (const node of laid.nodes) {
      const group = svg("g", { class: nodeClass(node), "data-node-id": node.id, "data-status": node.status, "data-reused": node.reused ? "true" : "false", transform: `translate(${node.x} ${node.y})`, tabindex: 0, role: "button" },
        svg("title", {}, nodeTitle(node)),
        svg("rect", { width: view.node_width, height: view.node_height, rx: 8 }),
        svg("circle", { class: "dot", cx: 14, cy: 18, r: 5 }),
        svg("foreignObject", { x: 26, y: 9, width: view.node_width - 34, height: 18 },
          el("div", { class: "label", text: node.name })),
        svg("foreignObject", { x: 14, y: 29, width: view.node_width - 22, height: 18 },
          el("div", { class: "label kind", text: nodeKind(node) })));
      group.addEventListener("click", () => select(node.id));
      group.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" && event.key !== " ") return;
        event.preventDefault(); // Space would scroll the page
        select(node.id);
      });
      root.append(group);
    }
    if (!view.nodes.length) {
      root.append(svg("text", { x: 16, y: 40, class: "kind" }, "Planning the canvas…"));
    }
    $("graph").replaceChildren(root);
  }

  // A re-run's reused block (carried over from the run it re-ran) says so in its class, label and title.
  function nodeClass(node) {
    return `node status-${node.status}${node.reused ? " reused" : ""}`;
  }

  // A reused block's label says so in place of its type (in its title and details), which would not fit beside it.
  function nodeKind(node) {
    return node.reused ? `reused · ${node.status}` : `${node.type} · ${node.status}`;
  }

  function nodeTitle(node) {
    return `${node.name} (${node.type}): ${node.status}${node.reused ? ", reused" : ""}`;
  }

  function update(view) {
    for (const node of view.nodes) {
      const group = document.querySelector(`g.node[data-node-id="${CSS.escape(node.id)}"]`);
      if (!group || group.getAttribute("data-status") === node.status) continue;
      group.setAttribute("class", `${nodeClass(node)}${node.id === selected ? " selected" : ""}`);
      group.setAttribute("data-status", node.status);
      group.querySelector("title").textContent = nodeTitle(node);
      group.querySelector(".label.kind").textContent = nodeKind(node);
    }
  }

  function select(nodeId) {
    selected = nodeId;
    for (const group of document.querySelectorAll("g.node")) {
      group.classList.toggle("selected", group.getAttribute("data-node-id") === nodeId);
    }
    showNode(nodesById.get(nodeId));
  }

  function showNode(node) {
    if (!node) return;
    $("node-name").textContent = node.name;
    $("node-hint").hidden = true;
    $("node-details").hidden = false;
    $("node-type").textContent = node.type;
    const status = $("node-status");
    status.textContent = node.status;
    status.className = `badge ${node.status}`;
    $("node-credits").textContent = String(node.credits ?? 0);
    $("node-estimate").textContent = node.estimated_credits == null ? "–" : `${node.estimated_credits} credits`;
    $("node-models").textContent = (node.models_used || []).join(", ") || "–";
    $("node-url").replaceChildren(node.url ? el("a", { href: node.url, rel: "noopener noreferrer", target: "_blank", text: shorten(node.url, 40) }) : "–");
    $("node-error").textContent = node.error ? `Error: ${node.error}` : "";
    $("node-reused").hidden = !node.reused;
    showRerun(node);
    const pending = node.status === "idle" || node.status === "running";
    // A block's content is model or extracted text: rendered as the answer is (sanitised markdown, never HTML), with
    // its line breaks kept (the panel's pre-wrap), so plain extracted text reads as it was.
    const content = $("node-content");
    if (node.content) content.replaceChildren(CanvasMarkdown.render(node.content, 4));
    else content.textContent = pending ? "(no content yet)" : "(no content)";
    const sources = (node.sources || []).map((source) => {
      const label = source.title || source.file_name || source.url || "source";
      const where = [source.page ? `page ${source.page}` : null, source.timestamp].filter(Boolean).join(", ");
      const link = source.url && /^https?:/i.test(source.url)
        ? el("a", { href: source.url, rel: "noopener noreferrer", target: "_blank", text: label })
        : el("span", { text: label });
      return el("li", {}, link, where ? ` (${where})` : null);
    });
    if (!sources.length) sources.push(el("li", { class: "muted none", text: "none" }));
    $("node-sources").replaceChildren(...sources);
  }

  // Review: a run created with review=true waits with its plan (its blocks and their estimated credits) until
  // approved; a running run can be cancelled. POSTs of the session: its CSRF token goes with them.
  let timer = null;
  function schedule(delay) {
    window.clearTimeout(timer);
    timer = window.setTimeout(refresh, delay);
  }

  let shownPlan = "";
  function showReview(view) {
    const run = view.run;
    const waiting = run.awaiting_approval === true;
    $("review").hidden = !waiting;
    $("run-actions").hidden = run.status !== "running";
    if (!waiting) return;
    const plan = view.nodes.map((node) => [node.id, node.name, node.type, node.estimated_credits]);
    const key = JSON.stringify([plan, run.estimated_credits]);
    if (key === shownPlan) return;
    shownPlan = key;
    $("review-summary").textContent =
      `${view.nodes.length} blocks planned · estimated ${run.estimated_credits ?? 0} credits. Nothing runs until you approve.`;
    $("review-plan").replaceChildren(...view.nodes.map((node) => el("li", { "data-node-id": node.id },
      `${node.name} (${node.type}): ${node.estimated_credits ?? "?"} credits`)));
  }

  async function act(action, pending, done) {
    const buttons = [$("approve-run"), $("cancel-run")];
    for (const button of buttons) button.disabled = true;
    notify(pending, "info");
    try {
      const session = await call("../portal/api/", "GET", "session");
      Canvas.setCsrf(session.csrf_token);
      await call("../portal/api/", "POST", `runs/${encodeURIComponent(runId)}/${action}`);
      notify(done, "info");
    } catch (error) {
      notify(`${action === "approve" ? "Approval" : "Cancel"} refused: ${error.message}`, "error");
    }
    for (const button of buttons) button.disabled = false;
    schedule(0);
  }

  // Re-run: once the run has ended, a block can run again with new instructions (and what depends on it) in a new
  // run, which the viewer then shows. A POST of the session: the session's CSRF token goes with it.
  let runEnded = false;
  let canvasId = null;
  let rerunShownFor = null;
  function showRerun(node) {
    $("rerun-form").hidden = !runEnded;
    if (rerunShownFor === node.id) return; // keep what is being typed across refreshes
    rerunShownFor = node.id;
    $("rerun-instructions").value = node.instructions || "";
    $("rerun-button").disabled = false;
  }

  async function rerun(event) {
    event.preventDefault();
    if (!selected || !canvasId) return;
    const button = $("rerun-button");
    button.disabled = true;
    notify("Starting the re-run…", "info");
    try {
      const session = await call("../portal/api/", "GET", "session");
      Canvas.setCsrf(session.csrf_token);
      const created = await call("../portal/api/", "POST",
        `canvas/${encodeURIComponent(canvasId)}/blocks/${encodeURIComponent(selected)}/rerun`,
        { instructions: $("rerun-instructions").value });
      window.location.assign(`./${encodeURIComponent(created.run_id)}`);
    } catch (error) {
      notify(`Re-run refused: ${error.message}`, "error");
      button.disabled = false;
    }
  }

  function taskList(tasks) {
    return el("ul", {}, ...tasks.map((task) => el("li", { "data-task-id": task.task_id },
      el("span", { class: `badge ${task.status}`, text: task.status }),
      el("span", { text: task.name }),
      task.children && task.children.length ? taskList(task.children) : null)));
  }

  function showRun(view) {
    const run = view.run;
    runEnded = run.status !== "running";
    canvasId = run.canvas_id;
    const rerunOf = run.metadata && run.metadata.rerun_of;
    $("run-rerun-of").hidden = !rerunOf;
    if (rerunOf) {
      const source = nodesById.get(rerunOf.block_id);
      $("run-rerun-of").replaceChildren("A re-run of ", el("a", { href: `./${encodeURIComponent(rerunOf.run_id)}`, text: "an earlier run" }),
        source ? ` from its block ${source.name}` : "");
    }
    showReview(view);
    document.title = `${view.canvas_name || "Canvas"} · Canvas viewer`;
    $("canvas-name").textContent = view.canvas_name || "Canvas";
    const status = $("run-status");
    status.textContent = run.status;
    status.className = `badge ${run.status}`;
    // The canvas is named after the prompt's first line: the prompt is shown when it says more.
    const prompt = run.prompt.trim() === view.canvas_name ? "" : run.prompt;
    $("run-prompt").textContent = prompt;
    $("run-prompt").hidden = !prompt;
    const progress = run.progress;
    $("run-progress").textContent = progress
      ? `${progress.tasks_completed}/${progress.tasks_total} tasks · ${Math.round(progress.elapsed_ms / 1000)} s`
      : run.duration_ms != null ? `finished in ${Math.round(run.duration_ms / 1000)} s · ${run.metadata ? run.metadata.credits_consumed : 0} credits` : "";
    const tasks = [...view.tasks.not_completed, ...view.tasks.completed];
    $("tasks").replaceChildren(tasks.length ? taskList(tasks) : el("p", { class: "muted", text: "No tasks yet." }));
    if (run.result) {
      const artifacts = run.result.artifacts.map((artifact) => el("li", {},
        el("a", { href: artifact.download_url, download: artifact.name, rel: "noopener noreferrer", text: artifact.name }),
        ` (${artifact.type}, ${artifact.size_bytes.toLocaleString()} bytes)`));
      $("artifacts").replaceChildren(artifacts.length ? el("ul", {}, ...artifacts) : el("p", { class: "muted", text: "No artifacts." }));
      showAnswer(run.result.final_output);
      $("result").hidden = false;
    }
    showReasons(run, view.nodes);
  }

  // The answer as markdown, built as elements and text (markdown.js), drawn again only when it changed.
  let shownAnswer = null;
  function showAnswer(text) {
    if (text === shownAnswer) return;
    shownAnswer = text;
    $("final-output").replaceChildren(CanvasMarkdown.render(text || "", 3));
  }

  // Why a partial or failed run did not complete, at the top: the run's errors, or its blocks' when it has none,
  // each with a button that selects its block.
  let shownReasons = "";
  function showReasons(run, nodes) {
    const ended = run.status === "partial" || run.status === "failed";
    const names = new Map(nodes.map((node) => [node.id, node.name]));
    let reasons = (run.errors || []).map((e) => ({ blockId: e.block_id, type: e.block_type, error: e.error }));
    if (!reasons.length) {
      reasons = nodes.filter((node) => node.error).map((node) => ({ blockId: node.id, type: node.type, error: node.error }));
    }
    if (ended && !reasons.length) reasons = [{ error: `The run ended ${run.status} without a reason recorded.` }];
    const key = ended ? JSON.stringify(reasons) : "";
    if (key === shownReasons) return;
    shownReasons = key;
    $("run-errors").hidden = !ended;
    if (!ended) return;
    $("run-errors-title").textContent = run.status === "failed" ? "Why the run failed" : "Why the run is partial";
    $("run-errors-list").replaceChildren(...reasons.map((reason) => {
      const block = reason.blockId && names.has(reason.blockId)
        ? el("button", { type: "button", class: "link", onclick: () => {
          select(reason.blockId);
          $("panel").scrollIntoView({ block: "nearest" }); // below the canvas on a narrow screen
        } }, names.get(reason.blockId))
        : null;
      // The block's name leads its error already ("Block 0: …"): once is enough beside the button.
      const error = block && reason.error.startsWith(`${names.get(reason.blockId)}: `)
        ? reason.error.slice(names.get(reason.blockId).length + 2) : reason.error;
      return el("li", {}, block, block && reason.type ? ` (${reason.type})` : null, block ? ": " : null, error);
    }));
  }

  async function refresh() {
    let view;
    try {
      view = await call("../portal/api/", "GET", `runs/${encodeURIComponent(runId)}/canvas`);
    } catch (error) {
      if (error.status === 401) {
        // Sign in, then come back here (the portal accepts only its own pages and the viewer's as `next`).
        window.location.assign(`../portal?next=${encodeURIComponent(`runs/${encodeURIComponent(runId)}`)}`);
        return;
      }
      notify(error.message, "error");
      window.setTimeout(refresh, POLL_MS * 2);
      return;
    }
    notify("", "info");
    nodesById = new Map(view.nodes.map((node) => [node.id, node]));
    lastView = view;
    const ids = drawKey(view);
    if (ids !== drawnIds) {
      draw(view);
      drawnIds = ids;
      if (selected) select(selected);
    } else {
      update(view);
    }
    showRun(view);
    if (selected) showNode(nodesById.get(selected));
    if (view.run.status === "running") schedule(POLL_MS);
  }

  // A window made narrower or wider (a phone turned, a window resized) draws the canvas again when its fit changed.
  let resizing = 0;
  window.addEventListener("resize", () => {
    window.cancelAnimationFrame(resizing);
    resizing = window.requestAnimationFrame(() => {
      if (!lastView) return;
      const ids = drawKey(lastView);
      if (ids === drawnIds) return;
      draw(lastView);
      drawnIds = ids;
      if (selected) select(selected);
    });
  });

  $("approve-run").addEventListener("click", () => act("approve", "Approving…", "Approved: the run goes on."));
  $("cancel-run").addEventListener("click", () => act("cancel", "Cancelling…", "Cancelled."));
  $("rerun-form").addEventListener("submit", rerun);
  refresh();
})();
