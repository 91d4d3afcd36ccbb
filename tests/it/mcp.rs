//! `/mcp` with the official MCP client SDKs (Python `mcp`, and the TypeScript SDK) against the
//! real binary: initialize, the tool list and its schemas, `ask_agent` with progress, routine
//! tools (started, declined, not_started, unknown, every validation code), updates across an
//! operator's reply, a server restart mid-session, a fresh session, sessionless continuation
//! with the conversation handle, revocation, and isolation.
//!
//! The SDKs are installed by `scripts/install-deps.sh test` (target/pydeps, target/nodedeps).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use reqwest::blocking::Client;
use reqwest::header;
use serde_json::{Value, json};

use crate::converse::refund_routine;
use crate::e2e::{Server, bootstrap};

/// One official-SDK client process speaking the drivers' JSON-lines protocol.
struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Driver {
    fn python() -> Driver {
        Driver::spawn("python3", &["-u", "tests/clients/mcp_driver.py"])
    }

    fn typescript() -> Driver {
        Driver::spawn("node", &["tests/clients/mcp_driver.mjs"])
    }

    fn spawn(program: &str, args: &[&str]) -> Driver {
        let root = env!("CARGO_MANIFEST_DIR");
        let check = Command::new(program).args(args).arg("--check").current_dir(root).output();
        let ok = check.as_ref().is_ok_and(|o| o.status.success());
        assert!(ok, "the {program} MCP SDK is missing: run scripts/install-deps.sh test ({check:?})");
        let mut child = Command::new(program)
            .args(args)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Driver { child, stdin, stdout }
    }

    fn send(&mut self, cmd: Value) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("driver said {line:?}: {e}"))
    }

    fn run(&mut self, cmd: Value) -> Value {
        if std::env::var("MCP_TEST_TRACE").is_ok() {
            eprintln!("driver <- {cmd}");
        }
        self.send(cmd);
        self.reply()
    }

    fn ok(&mut self, cmd: Value) -> Value {
        let v = self.run(cmd.clone());
        assert_eq!(v["ok"], true, "{cmd} → {v}");
        v
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.ok(json!({"op": "call", "name": name, "arguments": arguments, "progress": false, "timeoutSecs": 60}))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "exit"}));
        let _ = self.child.wait();
    }
}

/// A server with a document, a published agent exposing `request_refund`, and the owner's
/// dashboard session.
struct Setup {
    server: Option<Server>,
    data: std::path::PathBuf,
    http: Client,
    cookie: String,
    agent: String,
    _dir: tempfile::TempDir,
}

impl Setup {
    fn start() -> Setup {
        Setup::start_with(&[])
    }

    fn start_with(env: &[(&str, &str)]) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        bootstrap(&data);
        let server = Server::start(&data, env);
        let http = Client::new();
        let r = http
            .post(format!("{}/api/v1/auth/login", server.base))
            .json(&json!({"email": "root@example.com", "password": "root-password"}))
            .send()
            .unwrap();
        assert!(r.status().is_success());
        let cookie = r
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_string))
            .collect::<Vec<_>>()
            .join("; ");
        let mut s = Setup { server: Some(server), data, http, cookie, agent: String::new(), _dir: dir };
        let agents = s.dash("GET", "/api/v1/agents", Value::Null);
        s.agent = agents["agents"][0]["id"].as_str().or(agents["items"][0]["id"].as_str()).unwrap().to_string();
        s.dash(
            "POST",
            "/api/v1/document/",
            json!({"title": "Shipping times",
            "content": "Standard shipping takes 3 to 5 business days within the country."}),
        );
        while s.dash("GET", "/api/v1/document/progress?waitMs=30000", Value::Null)["idle"] != true {}
        let agent = s.agent.clone();
        s.dash("POST", &format!("/api/v1/agents/{agent}/routines"), json!({"definition": refund_routine()}));
        s.publish();
        s
    }

    fn base(&self) -> String {
        self.server.as_ref().unwrap().base.clone()
    }

    fn dash(&self, method: &str, path: &str, body: Value) -> Value {
        let mut req = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base()))
            .header(header::COOKIE, &self.cookie)
            .header(header::ORIGIN, self.base());
        if !body.is_null() {
            req = req.json(&body);
        }
        let r = req.send().unwrap();
        let status = r.status();
        let v: Value = r.json().unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path}: {status} {v}");
        v
    }

    fn publish(&self) {
        let a = &self.agent;
        let state = self.dash("GET", &format!("/api/v1/agents/{a}/revision-state"), Value::Null);
        let g = state["draft"]["generation"].as_i64().unwrap();
        let cand = self.dash(
            "POST",
            &format!("/api/v1/agents/{a}/revisions/candidates"),
            json!({"expectedDraftGeneration": g}),
        );
        self.dash(
            "POST",
            &format!("/api/v1/agents/{a}/revisions/{}/publish", cand["id"].as_str().unwrap()),
            json!({"expectedDraftGeneration": g, "expectedPublishedRevisionId": state["publishedRevision"]["id"],
                "idempotencyKey": format!("k{g}")}),
        );
    }

    /// A new credential: (id, secret).
    fn credential(&self, audience: &str) -> (String, String) {
        let v = self.dash(
            "POST",
            &format!("/api/v1/agents/{}/channel-credentials", self.agent),
            json!({"audience": audience, "label": "tests"}),
        );
        (v["credential"]["id"].as_str().unwrap().to_string(), v["secret"].as_str().unwrap().to_string())
    }

    fn restart(&mut self) {
        let old = self.server.take().unwrap();
        let addr = old.base.trim_start_matches("http://").to_string();
        old.terminate();
        self.server = Some(Server::start_at(&self.data, &addr, &[]));
    }
}

fn auth(secret: &str) -> Value {
    json!({"Authorization": format!("Bearer {secret}")})
}

fn structured(v: &Value) -> &Value {
    &v["structuredContent"]
}

#[test]
fn the_python_sdk_converses_invokes_routine_tools_and_survives_a_restart() {
    let mut s = Setup::start();
    let (cred_id, secret) = s.credential("mcp");
    let url = format!("{}/mcp", s.base());
    let mut py = Driver::python();

    // initialize: a session
    let v = py.ok(json!({"op": "connect", "url": url, "headers": auth(&secret)}));
    let sid = v["sessionId"].as_str().expect("an Mcp-Session-Id").to_string();
    assert_eq!(v["serverInfo"]["name"], "steward");
    assert!(v["capabilities"]["tools"].is_object());
    assert_ne!(v["capabilities"]["tools"]["listChanged"], true, "the list is pinned: no list_changed");

    // the tools, with the routine's schema
    let v = py.ok(json!({"op": "list_tools"}));
    let names: Vec<&str> = v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["ask_agent", "get_conversation_updates", "get_agent_profile", "list_routines", "request_refund"]
    );
    let refund = v["tools"].as_array().unwrap().iter().find(|t| t["name"] == "request_refund").unwrap();
    assert_eq!(refund["description"], "Request a refund for an order.");
    assert_eq!(refund["inputSchema"]["required"], json!(["order_ref", "email"]));
    assert_eq!(refund["inputSchema"]["properties"]["since"]["format"], "date");
    assert_eq!(refund["inputSchema"]["additionalProperties"], false);

    // ask_agent with progress: the answer, then the envelope as JSON; structured = the envelope
    let v = py.ok(json!({"op": "call", "name": "ask_agent", "progress": true, "timeoutSecs": 60,
        "arguments": {"message": "How many business days does standard shipping take?"}}));
    assert_eq!(v["isError"], false, "{v}");
    let env = structured(&v).clone();
    let text = v["text"][0].as_str().unwrap();
    let answer = env["answer"]["text"].as_str().unwrap();
    assert!(answer.contains("3 to 5 business days"), "{env}");
    assert!(text.starts_with(answer) && text.contains("\"conversationId\""), "{text}");
    assert_eq!(env["answer"]["citations"][0]["title"], "Shipping times");
    assert_eq!(env["ownership"], json!({"state": "ai_owned", "suppressed": false}));
    assert!(!v["progress"].as_array().unwrap().is_empty(), "progress notifications: {v}");
    let cid = env["conversationId"].as_str().unwrap().to_string();
    let handle = env["conversation"].as_str().unwrap().to_string();

    // routine tools: started (slots given), then declined (once per conversation)
    let v = py.call("request_refund", json!({"order_ref": "A-17", "email": "ann@example.com"}));
    assert_eq!(v["isError"], false, "{v}");
    assert_eq!(structured(&v)["invocation"], json!({"toolName": "request_refund", "outcome": "started"}));
    assert_eq!(structured(&v)["routine"]["status"], "completed");
    assert_eq!(structured(&v)["conversationId"], cid.as_str(), "the session keeps one conversation");
    let v = py.call("request_refund", json!({"order_ref": "A-18", "email": "ann@example.com"}));
    assert_eq!(structured(&v)["invocation"]["outcome"], "declined");
    // invalid input: every code, as a tool error; the value is never echoed
    let v = py.call(
        "request_refund",
        json!({"order_ref": "x".repeat(2001), "email": "nope", "amount": "12",
        "since": "2026-13-01", "colour": "secret-blue"}),
    );
    assert_eq!(v["isError"], true, "{v}");
    let e = &structured(&v)["error"];
    assert_eq!(e["details"]["code"], "routine_invocation_invalid");
    let mut codes: Vec<String> = e["details"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| format!("{}:{}", x["path"].as_str().unwrap(), x["code"].as_str().unwrap()))
        .collect();
    codes.sort();
    assert_eq!(codes, ["amount:type", "colour:unknown_field", "email:format", "order_ref:too_long", "since:format"]);
    assert!(!v.to_string().contains("secret-blue"));
    let v = py.call("request_refund", json!({"order_ref": "   "}));
    assert_eq!(structured(&v)["error"]["details"]["errors"][0], json!({"path": "order_ref", "code": "required"}));
    let v = py.call("no_such_tool", json!({}));
    assert_eq!(v["isError"], true);
    assert_eq!(structured(&v)["error"]["details"]["code"], "routine_tool_unknown");
    let v = py.call("ask_agent", json!({"message": "hi", "extra": 1}));
    assert_eq!(structured(&v)["error"]["details"]["code"], "invalid_arguments");

    // the read tools
    let v = py.call("get_agent_profile", json!({}));
    assert_eq!(structured(&v)["canAnswerFrom"]["documentCount"], 1, "{v}");
    assert_eq!(structured(&v)["routineTools"], json!(["request_refund"]));
    let v = py.call("list_routines", json!({}));
    assert_eq!(structured(&v)["tools"][0]["toolName"], "request_refund");

    // updates: the most recent page, then a wait that an operator's reply ends
    let v = py.call("get_conversation_updates", json!({}));
    let page = structured(&v).clone();
    assert_eq!(page["messages"].as_array().unwrap().len(), 3, "{page}");
    let cursor = page["cursor"].as_str().unwrap().to_string();
    py.send(json!({"op": "call", "name": "get_conversation_updates", "progress": false, "timeoutSecs": 60,
        "arguments": {"cursor": cursor, "waitMs": 20000}}));
    let o = s.dash("POST", &format!("/api/v1/conversations/{cid}/takeover"), json!({}));
    let version = o["ownership"]["version"].as_i64().unwrap();
    s.dash(
        "POST",
        &format!("/api/v1/conversations/{cid}/reply"),
        json!({"message": "Sam here: approved.", "expectedVersion": version}),
    );
    let mut v = py.reply();
    assert_eq!(v["ok"], true, "{v}");
    if structured(&v)["messages"] == json!([]) {
        // the takeover (an ownership change) ended the wait first: wait again for the reply
        assert_eq!(structured(&v)["ownership"], json!({"state": "human_owned"}));
        v = py.call("get_conversation_updates", json!({"cursor": cursor, "waitMs": 20000}));
    }
    let page = structured(&v);
    assert_eq!(page["messages"][0]["author"], "human", "{page}");
    assert_eq!(page["messages"][0]["text"], "Sam here: approved.");
    assert_eq!(page["ownership"], json!({"state": "human_owned"}));

    // a restart: the same session id carries on in the same conversation
    s.restart();
    let v = py.call("ask_agent", json!({"message": "And express shipping?"}));
    assert_eq!(v["isError"], false, "{v}");
    assert_eq!(structured(&v)["conversationId"], cid.as_str(), "after the restart: {v}");
    assert_eq!(py.ok(json!({"op": "session_id"}))["sessionId"], sid.as_str());

    // dropping the session: a new one, a new conversation
    py.ok(json!({"op": "close"}));
    let v = py.ok(json!({"op": "connect", "url": url, "headers": auth(&secret)}));
    assert_ne!(v["sessionId"], sid.as_str());
    let v = py.call("ask_agent", json!({"message": "How many business days does standard shipping take?"}));
    let fresh = structured(&v)["conversationId"].as_str().unwrap().to_string();
    assert_ne!(fresh, cid);
    // a routine mid-flight keeps the turn: the tool call does not start
    py.call("ask_agent", json!({"message": "I want a refund for my order please"}));
    let v = py.call("request_refund", json!({"order_ref": "B-2", "email": "bo@example.com"}));
    assert_eq!(structured(&v)["invocation"]["outcome"], "not_started", "{v}");
    assert_eq!(structured(&v)["routine"]["status"], "waiting_for_input", "the running routine did not move: {v}");
    // the conversation handle continues the first conversation
    let v = py.call("ask_agent", json!({"message": "Thanks!", "conversation": handle}));
    assert_eq!(structured(&v)["conversationId"], cid.as_str());
    let v = py.call("ask_agent", json!({"message": "Thanks!", "conversation": "forged.handle"}));
    assert_eq!(structured(&v)["error"]["code"], "not_found");

    // a sessionless client (the protocol revision without sessions): a new conversation per
    // call, or the handle's
    let mut stateless = Driver::python();
    let v = stateless.ok(json!({"op": "connect_stateless", "url": url, "headers": auth(&secret)}));
    assert!(v["sessionId"].is_null(), "{v}");
    let v = stateless.ok(json!({"op": "list_tools"}));
    assert!(v["tools"].as_array().unwrap().iter().any(|t| t["name"] == "request_refund"));
    let a = stateless.call("ask_agent", json!({"message": "How many business days does standard shipping take?"}));
    let b = stateless.call("ask_agent", json!({"message": "How many business days does standard shipping take?"}));
    let (ca, cb) =
        (structured(&a)["conversationId"].as_str().unwrap(), structured(&b)["conversationId"].as_str().unwrap());
    assert!(ca != cb && ca != cid && cb != cid, "a new conversation per call");
    let v = stateless.call("ask_agent", json!({"message": "One more question", "conversation": handle}));
    assert_eq!(structured(&v)["conversationId"], cid.as_str(), "the handle continues: {v}");
    let v = stateless.call("get_conversation_updates", json!({"conversation": handle}));
    assert!(!structured(&v)["messages"].as_array().unwrap().is_empty());
    drop(stateless);

    // revoking the credential: 401 at the next request
    s.dash("POST", &format!("/api/v1/agents/{}/channel-credentials/{cred_id}/revoke", s.agent), json!({}));
    let v = py.run(json!({"op": "call", "name": "ask_agent", "arguments": {"message": "hello?"}, "timeoutSecs": 30}));
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["status"], 401, "{v}");
    drop(py);

    // an unknown session id is 404, a REST credential or none is 401, a foreign browser origin 403
    let (_, secret2) = s.credential("mcp");
    let (_, rest) = s.credential("rest");
    let post = |auth: Option<&str>, extra: &[(&str, &str)]| {
        let mut r = s.http.post(&url).header("accept", "application/json, text/event-stream").json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        if let Some(a) = auth {
            r = r.header("authorization", format!("Bearer {a}"));
        }
        for (k, v) in extra {
            r = r.header(*k, *v);
        }
        r.send().unwrap().status().as_u16()
    };
    assert_eq!(post(Some(&secret2), &[("mcp-session-id", "no-such-session")]), 404);
    assert_eq!(post(Some(&secret2), &[("mcp-session-id", &sid)]), 404, "a closed session");
    assert_eq!(post(Some(&rest), &[]), 401);
    assert_eq!(post(None, &[]), 401);
    assert_eq!(post(Some(&secret2), &[("origin", "http://evil.example")]), 403);
    let r = s
        .http
        .post(&url)
        .bearer_auth(&secret2)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400, "a parse error");
    assert_eq!(r.json::<Value>().unwrap()["error"]["code"], -32700);
    // the MCP credential on the API: 401
    let r = s.http.get(format!("{}/api/v1/agents", s.base())).bearer_auth(&secret2).send().unwrap();
    assert_eq!(r.status().as_u16(), 401);
    s.server.take().unwrap().terminate();
}

#[test]
fn the_typescript_sdk_initializes_lists_and_asks() {
    let s = Setup::start();
    let (_, secret) = s.credential("mcp");
    let mut ts = Driver::typescript();
    let v = ts.ok(json!({"op": "connect", "url": format!("{}/mcp", s.base()), "headers": auth(&secret)}));
    assert!(v["sessionId"].as_str().is_some(), "{v}");
    let v = ts.ok(json!({"op": "list_tools"}));
    assert!(v["tools"].as_array().unwrap().iter().any(|t| t["name"] == "request_refund"), "{v}");
    let v = ts.call("ask_agent", json!({"message": "How many business days does standard shipping take?"}));
    assert!(structured(&v)["answer"]["text"].as_str().unwrap().contains("3 to 5 business days"), "{v}");
    let v = ts.call("request_refund", json!({"order_ref": "C-3", "email": "cy@example.com"}));
    assert_eq!(structured(&v)["invocation"]["outcome"], "started", "{v}");
    ts.ok(json!({"op": "close"}));
    drop(ts);
    let mut s = s;
    s.server.take().unwrap().terminate();
}

#[test]
fn a_turn_over_the_budget_answers_pending_and_completes_through_updates() {
    // a budget of 0 s: every turn outlives it
    let mut s = Setup::start_with(&[
        ("STEWARD_MCP_TURN_BUDGET_SECS", "0"),
        ("STEWARD_CONVERSE_EXCHANGES_PER_SOURCE_PER_MINUTE", "2"),
    ]);
    let (_, secret) = s.credential("mcp");
    let mut py = Driver::python();
    py.ok(json!({"op": "connect", "url": format!("{}/mcp", s.base()), "headers": auth(&secret)}));
    let v = py.call("ask_agent", json!({"message": "How many business days does standard shipping take?"}));
    let env = structured(&v).clone();
    assert_eq!(env["status"], "pending", "{v}");
    assert_eq!(env["answer"]["text"], "");
    let cursor = env["updates"]["cursor"].as_str().unwrap().to_string();
    let v = py.call("get_conversation_updates", json!({"cursor": cursor, "waitMs": 20000}));
    let page = structured(&v);
    assert_eq!(page["messages"][0]["author"], "agent", "{page}");
    assert!(page["messages"][0]["text"].as_str().unwrap().contains("3 to 5 business days"), "{page}");
    drop(py);
    // new sessions per address are limited: the third initialize within the minute is 429
    let init =
        || {
            s.http
            .post(format!("{}/mcp", s.base()))
            .bearer_auth(&secret)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
                "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
            .send()
            .unwrap()
        };
    assert_eq!(init().status().as_u16(), 200);
    let r = init();
    assert_eq!(r.status().as_u16(), 429);
    assert!(r.headers().contains_key("retry-after"));
    s.server.take().unwrap().terminate();
}

/// An agent calling another Steward's `/mcp` as an external MCP server: an `mcp_tool` skill
/// (server URL and credential sealed, never shown, not exported), the server's tools listed live,
/// and a routine's tool step calling `ask_agent` there through the SSRF-guarded client.
#[test]
fn an_mcp_tool_skill_calls_a_second_stewards_mcp() {
    let remote = Setup::start();
    let (_, remote_secret) = remote.credential("mcp");
    let key = "ab".repeat(32);
    let local = Setup::start_with(&[("CONNECTOR_ENCRYPTION_KEY", &key), ("STEWARD_DELIVERY_ALLOW", "127.0.0.1")]);
    let agent = local.agent.clone();
    let server_url = format!("{}/mcp", remote.base());
    let skill = local.dash(
        "POST",
        &format!("/api/v1/agents/{agent}/skills"),
        json!({"name": "remote_support", "capability": "mcp_tool", "invocationMode": "routine_named",
            "target": {"kind": "mcp_connection", "id": "shipping-desk"},
            "config": {"serverUrl": server_url, "credential": remote_secret, "toolName": "ask_agent"}}),
    );
    let sid = skill["id"].as_str().unwrap().to_string();
    assert_eq!(skill["config"]["mcpServerConfigured"], true, "{skill}");
    assert!(!skill.to_string().contains(&remote_secret) && !skill.to_string().contains("serverUrl"), "{skill}");

    // the capability registry: the server's tools, asked live
    let tools = local.dash("GET", &format!("/api/v1/agents/{agent}/skills/{sid}/mcp-tools"), Value::Null);
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"ask_agent") && names.contains(&"request_refund"), "{tools}");

    // a routine whose tool step asks the remote agent, then says its answer
    let routine = json!({
        "name": "Ask the shipping desk",
        "activation": {"triggerDescription": "ask the shipping desk about delivery times", "priority": 1},
        "slots": [{"stableSlotId": "desk_answer", "key": "desk_answer", "type": "text", "required": false, "ordinal": 1}],
        "steps": [{"stableStepId": "ask", "kind": "tool", "ordinal": 1, "instruction": "Asking the shipping desk.",
                   "toolRef": "remote_support",
                   "metadata": {"inputBindings": [{"kind": "literal", "name": "message", "value": "How many business days does standard shipping take?"}],
                                "outputAssignments": [{"output": "answer", "variable": "desk_answer"}]}}],
        "transitions": [{"fromStep": "ask", "toRef": "done", "guardKind": "default", "ordinal": 1}],
        "terminals": [{"stableStepId": "done", "kind": "complete", "ordinal": 1, "instruction": "The shipping desk says: {{slot.desk_answer}}"}],
    });
    local.dash("POST", &format!("/api/v1/agents/{agent}/routines"), json!({"definition": routine}));
    local.publish();
    let v = local.dash(
        "POST",
        &format!("/api/v1/agents/{agent}/chat"),
        json!({"message": "Please ask the shipping desk about delivery times"}),
    );
    assert_eq!(v["routine"]["status"], "completed", "{v}");
    assert!(v["answer"].as_str().unwrap().contains("3 to 5 business days"), "the remote agent's answer: {v}");
    // the remote agent saw the call as a conversation of its MCP credential
    let hist = remote.dash("GET", "/api/v1/history/chat", Value::Null);
    assert!(hist.to_string().contains("\"mcp\""), "{hist}");

    // a directive bound to an external MCP skill claims the turn: the remote agent's answer is the reply
    local.dash(
        "POST",
        &format!("/api/v1/agents/{agent}/skills"),
        json!({"name": "desk_direct", "capability": "mcp_tool", "invocationMode": "agent_selectable",
            "target": {"kind": "mcp_connection", "id": "shipping-desk"},
            "config": {"serverUrl": server_url, "credential": remote_secret, "toolName": "ask_agent"}}),
    );
    local.dash(
        "POST",
        &format!("/api/v1/agents/{agent}/directives"),
        json!({"name": "shipping", "condition": {"kind": "always"}, "action": "Let the shipping desk answer with #desk_direct.",
            "binding": {"kind": "skill", "skillName": "desk_direct"}}),
    );
    local.publish();
    let before = remote.dash("GET", "/api/v1/history/chat", Value::Null).to_string().matches("\"mcp\"").count();
    let v = local.dash(
        "POST",
        &format!("/api/v1/agents/{agent}/chat"),
        json!({"message": "Do you sell gift cards?", "includeDebug": true}),
    );
    assert!(!v["answer"].as_str().unwrap().is_empty(), "{v}");
    let trace = v["debug"]["turnTrace"].to_string();
    assert!(trace.contains("\"claimed\":true"), "the external skill claimed the turn: {trace}");
    let after = remote.dash("GET", "/api/v1/history/chat", Value::Null).to_string().matches("\"mcp\"").count();
    assert!(after > before, "the remote agent answered a new conversation");

    let mut local = local;
    local.server.take().unwrap().terminate();
    let mut remote = remote;
    remote.server.take().unwrap().terminate();
}
