// The live session view: an AHP client over /ahp, drawing the tenant's sessions and one chat's
// turns from snapshots and the actions that follow them. The operator steers from here: Allow or
// Deny a call waiting for a person, Stop a running turn, answer the page's own tool, ask_operator.
// A dropped socket is opened again by itself, and the open session read afresh.
(function () {
  "use strict";
  const root = document.getElementById("live");
  const clientId = "console-" + Math.random().toString(16).slice(2, 10);
  root.dataset.clientId = clientId;  // the name its tools go by: <clientId>__ask_operator
  const ASK = {name: "ask_operator", description: "Ask the operator watching in the console; they type the answer.",
               inputSchema: {type: "object", properties: {question: {type: "string"}}, required: ["question"]}};
  const RETRY_MS = [500, 1000, 2000, 5000, 10000];
  const pending = new Map();
  let nextId = 1, clientSeq = 1, ws = null, retries = 0;
  let session = null, provider = "", chat = null, chatState = null, catalog = {};
  let indexQuery = "", indexPage = 1, indexTimer = null;

  const $ = (id) => document.getElementById(id);
  const el = (tag, props, ...children) => {
    const {dataset, ...rest} = props || {};
    const node = Object.assign(document.createElement(tag), rest);
    Object.assign(node.dataset, dataset || {});
    children.forEach((c) => node.append(c));
    return node;
  };
  const status = (text) => { $("live-status").textContent = text; };
  // A version 4 UUID without crypto.randomUUID, which plain-http pages lack.
  const uuid4 = () => ([1e7] + -1e3 + -4e3 + -8e3 + -1e11).replace(/[018]/g, (c) =>
    (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16));

  function call(method, params) {
    const id = nextId++;
    ws.send(JSON.stringify({jsonrpc: "2.0", id, method, params}));
    return new Promise((resolve, reject) => pending.set(id, {resolve, reject}));
  }
  function notify(method, params) {
    ws.send(JSON.stringify({jsonrpc: "2.0", method, params}));
  }
  function dispatch(channel, action) {
    ws.send(JSON.stringify({jsonrpc: "2.0", method: "dispatchAction", params: {channel, clientSeq: clientSeq++, action}}));
  }

  function connect() {
    ws = new WebSocket(root.dataset.websocketUrl + "?tkn=" + encodeURIComponent(root.dataset.token));
    ws.onopen = () => start().catch((error) => status("Could not start: " + (error.message || error)));
    ws.onclose = onClose;
    ws.onmessage = (e) => {
      const frame = JSON.parse(e.data);
      if ("id" in frame && !("method" in frame)) {
        const waiting = pending.get(frame.id);
        pending.delete(frame.id);
        if (waiting) frame.error ? waiting.reject(frame.error) : waiting.resolve(frame.result);
      } else if (frame.method === "action") {
        onAction(frame.params);
      } else if (frame.method && frame.method.startsWith("root/session")) {
        refreshIndexSoon();
      }
    };
  }

  function onClose(e) {
    pending.forEach((waiting) => waiting.reject({message: "the connection closed"}));
    pending.clear();
    $("live-compose").hidden = true;  // nothing typed now could be sent; it shows again once the chat is back
    if (e.code === 4401) { status("The page's token ended: reload the page."); return; }
    const delay = RETRY_MS[Math.min(retries++, RETRY_MS.length - 1)];
    status(`Disconnected (${e.code}); connecting again in ${delay / 1000} s…`);
    setTimeout(connect, delay);
  }

  async function start() {
    await call("initialize", {channel: "ahp-root://", protocolVersions: ["1.1.0", "1.0.0"], clientId,
                              clientInfo: {name: "Operators' console"}});
    retries = 0;
    await call("subscribe", {channel: "ahp-root://"});
    refreshIndex();
    const again = session || (root.dataset.session && "ahp-session:/" + root.dataset.session);
    session = chat = null;
    if (again) await openSession(again);
    // Only now: a message sent before the chat was subscribed again would have had nowhere to go.
    status("Connected as a client of this host.");
  }

  // The index: the tenant's sessions, those waiting for a person first, searchable, in pages.
  async function refreshIndex() {
    const url = `${root.dataset.indexUrl}?q=${encodeURIComponent(indexQuery)}&page=${indexPage}`;
    const answer = await fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}});
    if (answer.ok) drawIndex(await answer.json());
  }
  function refreshIndexSoon() {
    clearTimeout(indexTimer);
    indexTimer = setTimeout(refreshIndex, 300);
  }

  function drawIndex(index) {
    const list = $("live-session-list");
    list.replaceChildren(...index.items.map((s) => el("li", {
      className: session === s.resource ? "current" : "", onclick: () => openSession(s.resource),
      dataset: {session: s.resource, activity: s.activity}},
      el("span", {className: "live-title", textContent: s.title || "untitled " + s.id.slice(0, 8)}),
      ...(s.needsPerson ? [" ", el("span", {className: "live-badge", textContent: "needs a person"})] : []),
      el("div", {className: "live-meta", textContent: `${s.activity} · ${s.provider} · ${s.owner} · ${s.modified}`}))));
    if (!index.items.length) list.append(el("li", {textContent: index.query ? "No session matches." : "No sessions yet."}));
    $("live-page").textContent = index.count ? `page ${index.page} of ${index.pages} (${index.count} sessions)` : "";
    $("live-previous").disabled = index.page <= 1;
    $("live-next").disabled = index.page >= index.pages;
    indexPage = index.page;
  }

  async function openSession(uri) {
    if (session) notify("unsubscribe", {channel: session});
    if (chat) notify("unsubscribe", {channel: chat});
    session = uri;
    const state = (await call("subscribe", {channel: uri})).snapshot.state;
    dispatch(uri, {type: "session/activeClientSet",
                   activeClient: {clientId, displayName: "Operators' console", tools: [ASK]}});
    provider = state.provider;
    chat = state.defaultChat;
    chatState = (await call("subscribe", {channel: chat})).snapshot.state;
    drawTitle(state.title);
    $("live-compose").hidden = false;
    refreshIndexSoon();
    await learnCatalog();
    drawChat();
  }

  // The session's title once its first message names it; its id until then.
  function drawTitle(title) {
    $("live-chat-title").textContent = `${title || session.split("/").pop()} · provider ${provider}`;
  }

  async function learnCatalog() {
    const url = root.dataset.catalogUrl.replace("00000000-0000-0000-0000-000000000000", session.split("/").pop())
      + "?chat=" + chat.split("/").pop();
    const answer = await fetch(url, {headers: {Authorization: "Bearer " + root.dataset.token}});
    if (!answer.ok) return;
    const explained = await answer.json();
    catalog = Object.fromEntries([...explained.builtins, ...explained.tools].map((t) => [t.name, t.label]));
  }

  // Who provides the tool: a client that announced it, the chat's catalog (the host, a plugin,
  // an MCP server), or, for a harness, its CLI's own built-in, which the host's catalog never holds.
  function sourceOf(toolCall) {
    if (toolCall.contributor && toolCall.contributor.kind === "client") return "client " + toolCall.contributor.clientId;
    if (catalog[toolCall.toolName]) return catalog[toolCall.toolName];
    return provider === "echo" ? "not in the catalog" : "CLI built-in";
  }

  function findCall(turnId, toolCallId) {
    const turn = chatState.activeTurn && chatState.activeTurn.id === turnId ? chatState.activeTurn : null;
    return turn && turn.responseParts.find((p) => p.kind === "toolCall" && p.toolCall.toolCallId === toolCallId);
  }

  function onAction(envelope) {
    const a = envelope.action;
    if (envelope.rejectionReason) { status("Refused: " + envelope.rejectionReason); return; }
    if (envelope.channel === session && a.type === "session/serverToolsChanged") { learnCatalog().then(drawChat); return; }
    if (envelope.channel === session && a.type.startsWith("session/inputNeeded")) refreshIndexSoon();
    if (envelope.channel === session && a.type === "session/titleChanged") { drawTitle(a.title); refreshIndexSoon(); }
    if (envelope.channel !== chat || !chatState) return;
    const turn = chatState.activeTurn;
    if (a.type === "chat/turnStarted") {
      chatState.activeTurn = {id: a.turnId, message: a.message, responseParts: []};
    } else if (a.type === "chat/responsePart" && turn && turn.id === a.turnId) {
      turn.responseParts.push(a.part);
    } else if (a.type === "chat/delta" && turn && turn.id === a.turnId) {
      const part = turn.responseParts.find((p) => p.id === a.partId);
      if (part) part.content += a.content;
    } else if (a.type === "chat/toolCallStart" && turn && turn.id === a.turnId) {
      turn.responseParts.push({kind: "toolCall", toolCall: {toolCallId: a.toolCallId, toolName: a.toolName,
                                                            contributor: a.contributor, status: "streaming"}});
    } else if (a.type === "chat/toolCallReady") {
      // A call first arrives ready (confirmed "not-needed"); one that asks the person arrives
      // again with the question and no confirmation, waiting for Allow or Deny.
      const part = findCall(a.turnId, a.toolCallId);
      if (part) Object.assign(part.toolCall, a, {status: a.confirmed ? "running" : "pending-confirmation"});
    } else if (a.type === "chat/toolCallConfirmed") {
      const part = findCall(a.turnId, a.toolCallId);
      if (part) Object.assign(part.toolCall, {status: a.approved ? "running" : "denied",
                                              answeredBy: envelope.origin && envelope.origin.clientId});
    } else if (a.type === "chat/toolCallComplete") {
      const part = findCall(a.turnId, a.toolCallId);
      if (part) Object.assign(part.toolCall, a.result, {status: "completed"});
    } else if (["chat/turnComplete", "chat/error", "chat/turnCancelled"].includes(a.type) && turn && turn.id === a.turnId) {
      turn.state = {"chat/turnComplete": "complete", "chat/error": "error", "chat/turnCancelled": "cancelled"}[a.type];
      if (a.error) turn.error = a.error;
      chatState.turns.push(turn);
      delete chatState.activeTurn;
    } else {
      return;
    }
    // What the index says of this session (running, waiting, idle) moves with the turn and its calls.
    if (!["chat/responsePart", "chat/delta"].includes(a.type)) refreshIndexSoon();
    drawChat();
  }

  function resultText(toolCall) {
    const texts = (toolCall.content || []).filter((c) => c.type === "text").map((c) => c.text);
    if (toolCall.error && toolCall.error.message && !texts.length) texts.push(toolCall.error.message);
    return texts.join("\n");
  }

  const button = (value, className, onclick) => el("button", {type: "button", className, textContent: value, onclick});

  function confirmation(turnId, toolCall) {
    const answer = (approved) => dispatch(chat, {type: "chat/toolCallConfirmed", turnId, toolCallId: toolCall.toolCallId,
      ...(approved ? {approved: true, confirmed: "user-action"} : {approved: false, reason: "denied"})});
    return el("div", {className: "live-confirm"},
      el("span", {className: "live-question", textContent: toolCall.confirmationTitle || `Run ${toolCall.toolName}?`}),
      button("Allow", "live-allow", () => answer(true)), button("Deny", "live-deny", () => answer(false)));
  }

  function askOperator(turnId, toolCall) {
    const answer = el("input", {type: "text", name: "answer", size: 50});
    return el("form", {className: "live-answer", onsubmit: (e) => {
      e.preventDefault();
      dispatch(chat, {type: "chat/toolCallComplete", turnId, toolCallId: toolCall.toolCallId,
                      result: {success: true, pastTenseMessage: "The operator answered",
                               content: [{type: "text", text: answer.value}]}});
    }}, "Your answer: ", answer, el("input", {type: "submit", value: "Answer"}));
  }

  function drawToolCall(turnId, toolCall) {
    const outcome = toolCall.status === "completed" ? (toolCall.success === false ? " (failed)" : " (succeeded)") : "";
    const box = el("div", {className: "live-tool-call " + toolCall.status,
                           dataset: {toolCall: toolCall.toolCallId, tool: toolCall.toolName}},
      el("div", {}, el("b", {textContent: toolCall.toolName}), " · ",
         el("span", {className: "source", textContent: sourceOf(toolCall)}), " · ",
         el("span", {className: "status", textContent: toolCall.status + outcome})));
    if (toolCall.toolInput) box.append(el("pre", {className: "input", textContent: "input: " + toolCall.toolInput}));
    if (toolCall.status === "pending-confirmation") box.append(confirmation(turnId, toolCall));
    if (toolCall.status === "completed") box.append(el("pre", {className: "result", textContent: resultText(toolCall)}));
    const mine = toolCall.contributor && toolCall.contributor.clientId === clientId;
    if (mine && toolCall.status === "running") box.append(askOperator(turnId, toolCall));
    return box;
  }

  function drawTurn(turn) {
    const box = el("div", {className: "live-turn", dataset: {turn: turn.id}},
      el("div", {className: "live-message", textContent: turn.message.text}));
    for (const part of turn.responseParts) {
      if (part.kind === "toolCall") box.append(drawToolCall(turn.id, part.toolCall));
      else if (part.kind === "markdown") box.append(el("div", {className: "live-markdown", textContent: part.content}));
    }
    const state = turn.state || "running";
    const line = el("div", {className: "live-turn-state", textContent: state + (turn.error ? ": " + turn.error.message : "")});
    if (!turn.state) line.append(" ", button("Stop", "live-stop", () => dispatch(chat, {type: "chat/turnCancelled", turnId: turn.id})));
    box.append(line);
    return box;
  }

  function drawChat() {
    const turns = [...chatState.turns, ...(chatState.activeTurn ? [chatState.activeTurn] : [])];
    $("live-turns").replaceChildren(...turns.map(drawTurn));
  }

  $("live-compose").onsubmit = (e) => {
    e.preventDefault();
    const text = e.target.elements.text.value;
    if (!text.trim() || !chat) return;
    dispatch(chat, {type: "chat/turnStarted", turnId: uuid4(), startedAt: new Date().toISOString(),
                    message: {text, origin: {kind: "user"}}});
    e.target.elements.text.value = "";
  };
  $("live-new-session").onsubmit = async (e) => {
    e.preventDefault();
    const uri = "ahp-session:/" + uuid4();
    try {
      await call("createSession", {channel: uri, provider: e.target.elements.provider.value});
    } catch (error) { status("Could not create the session: " + error.message); return; }
    openSession(uri);
  };
  $("live-search").onsubmit = (e) => {
    e.preventDefault();
    indexQuery = e.target.elements.q.value;
    indexPage = 1;
    refreshIndex();
  };
  $("live-previous").onclick = () => { indexPage -= 1; refreshIndex(); };
  $("live-next").onclick = () => { indexPage += 1; refreshIndex(); };
  connect();
})();
