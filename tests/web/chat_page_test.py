#!/usr/bin/python3
"""The chat page (GET /) in headless Chromium, driven over chromedriver's W3C WebDriver HTTP
protocol with the standard library only.

1. On stories260K (with a ChatML template): type a message, watch the answer stream in (its text
   grows while it is streaming), and check it equals what /v1/chat/completions answers for the
   same conversation; then a second turn, whose request carries the first (the conversation
   stays in the page).
2. On a slow model: ask for thousands of tokens, press Stop once text is streaming, and check
   the page shows it stopped and the server cancelled the generation at once (metrics).
Screenshots are written to OUT_DIR (paths printed).

Usage: chat_page_test.py BIN_DIR MODELS_DIR OUT_DIR ($TEXTGEN_MODELS, when set, overrides
MODELS_DIR). Exit 77 (skipped) only when chromium or chromedriver is not installed.
"""
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN_DIR, MODELS_DIR, OUT_DIR = sys.argv[1:4]
MODELS_DIR = os.environ.get("TEXTGEN_MODELS") or MODELS_DIR
TEMPLATES = os.path.join(MODELS_DIR, "..", "chat-templates", "templates")
CHATML = os.path.join(TEMPLATES, "Qwen-Qwen2.5-7B-Instruct.jinja")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_until(what, predicate, timeout=30.0, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting for " + what)


class Server:
    """textgen-server with the HTTP API and metrics on free ports."""

    def __init__(self, model, extra=()):
        self.http_port, self.metrics_port = free_port(), free_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [os.path.join(BIN_DIR, "textgen-server"), "--model", model, "--listen", "127.0.0.1:0",
             "--http-listen", f"127.0.0.1:{self.http_port}",
             "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
             "--chat-template", CHATML,
             # The page's answers are compared with the API's exactly, whatever the prefix
             # cache serves: batch invariance, which auto turns on only at the AVX-512 levels.
             "--batch-invariant", "on", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.http_port}"
        wait_until("the server to serve", lambda: self.ready(), timeout=60)

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("textgen-server exited:\n" + self.output())
        try:
            return http("GET", self.url + "/v1/models", timeout=2)[0] == 200
        except OSError:
            return False

    def metric(self, name, labels=""):
        _, text = http("GET", f"http://127.0.0.1:{self.metrics_port}/metrics")
        m = re.search("^" + re.escape(name + labels) + r" (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Browser:
    """One headless Chromium session through chromedriver."""

    def __init__(self):
        self.port = free_port()
        self.driver = subprocess.Popen(["chromedriver", f"--port={self.port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_until("chromedriver", lambda: self.driver_ready(), timeout=30)
        caps = {"browserName": "chrome", "goog:chromeOptions": {
            "binary": shutil.which("chromium"),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1100,800"]}}
        session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self.session = f"/session/{session['sessionId']}"

    def driver_ready(self):
        try:
            return json.loads(http("GET", self.base + "/status", timeout=2)[1])["value"]["ready"]
        except (OSError, ValueError, KeyError):
            return False

    def call(self, method, path, body=None):
        status, text = http(method, self.base + path, body)
        value = json.loads(text)["value"]
        if status != 200:
            raise AssertionError(f"WebDriver {method} {path}: {status} {value}")
        return value

    def s(self, method, path="", body=None):
        return self.call(method, self.session + path, body)

    def open(self, url):
        self.s("POST", "/url", {"url": url})

    def find(self, css):
        return self.s("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def type(self, css, text):
        self.s("POST", f"/element/{self.find(css)}/value", {"text": text})

    def clear(self, css):
        self.s("POST", f"/element/{self.find(css)}/clear", {})

    def click(self, css):
        self.s("POST", f"/element/{self.find(css)}/click", {})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self, name):
        path = os.path.join(OUT_DIR, name)
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("GET", "/screenshot")))
        print("screenshot:", os.path.abspath(path))

    def quit(self):
        try:
            self.s("DELETE")
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=30)


LAST_ANSWER = """const all = document.querySelectorAll('.msg.assistant');
const a = all[all.length - 1];
return a ? {text: a.textContent, state: a.dataset.state, chunks: Number(a.dataset.chunks),
            finish: a.dataset.finish || null, count: all.length} : null;"""


def send(browser, text):
    browser.type("#input", text)
    browser.click("#send")


# Records, in the page, the answer's text length at every DOM change while it streams (a
# small model answers faster than WebDriver can poll).
WATCH = """window.lengths = [];
new MutationObserver(() => {
  const all = document.querySelectorAll('.msg.assistant');
  const a = all[all.length - 1];
  if (a && a.dataset.state === 'streaming') window.lengths.push(a.textContent.length);
}).observe(document.getElementById('messages'),
           {childList: true, subtree: true, characterData: true, attributes: true});"""


def streamed_answer(browser, previous_count):
    """Waits for a new answer to finish; returns it and the text lengths shown while streaming."""
    def done():
        a = browser.js(LAST_ANSWER)
        if not a or a["count"] <= previous_count:
            return None
        return a if a["state"] != "streaming" else None

    answer = wait_until("the answer", done, timeout=60)
    return answer, browser.js("const l = window.lengths; window.lengths = []; return l;")


def api_answer(server, messages, max_tokens):
    status, body = http("POST", server.url + "/v1/chat/completions",
                        {"messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert status == 200, body
    return json.loads(body)["choices"][0]["message"]["content"]


def check_streaming_and_conversation(browser):
    server = Server(os.path.join(MODELS_DIR, "stories260K.gguf"))
    try:
        browser.open(server.url + "/")
        wait_until("the model name", lambda: browser.js(
            "return document.getElementById('model').textContent") == "stories260K.gguf")
        browser.clear("#max-tokens")
        browser.type("#max-tokens", "200")
        browser.js(WATCH)
        send(browser, "Tell me a story about a cat.")
        answer, seen = streamed_answer(browser, 0)
        partial = sorted({n for n in seen if 0 < n < len(answer["text"])})
        print(f"first answer: {answer['chunks']} chunks, {len(partial)} partial texts shown "
              f"while streaming")
        assert answer["state"] == "done", answer
        assert answer["chunks"] > 5, answer
        # Tokens appeared as they arrived: the page showed partial texts before the end.
        # stories260K may finish before the browser's first read, so the text growing on
        # screen is checked on the slow model below.
        first = [{"role": "user", "content": "Tell me a story about a cat."}]
        assert answer["text"] == api_answer(server, first, 200), answer
        browser.screenshot("chat_page_answer.png")

        # The second turn sends the whole conversation.
        send(browser, "And then?")
        second, _ = streamed_answer(browser, 1)
        assert second["state"] == "done", second
        history = first + [{"role": "assistant", "content": answer["text"]},
                           {"role": "user", "content": "And then?"}]
        assert second["text"] == api_answer(server, history, 200), second
        bubbles = browser.js("return document.querySelectorAll('.msg').length")
        assert bubbles == 4, bubbles
        browser.screenshot("chat_page_conversation.png")
        print("ok: streamed answer equals the API's, the conversation stays in the page")
    finally:
        server.stop()


def check_stop(browser):
    model = os.path.join(OUT_DIR, "chat-page-slow.gguf")
    subprocess.run([os.path.join(BIN_DIR, "textgen-synth-model"), "--shape", "custom", "--arch",
                    "llama", "--dim", "256", "--layers", "4", "--heads", "4", "--kv-heads", "4",
                    "--head-dim", "64", "--ffn", "512", "--ctx", "16384", "--type", "f32",
                    "--vocab", os.path.join(MODELS_DIR, "vocab", "ggml-vocab-llama-spm.gguf"),
                    "--out", model], check=True, stdout=subprocess.DEVNULL)
    server = Server(model, ["--max-max-new-tokens", "12000"])
    try:
        browser.open(server.url + "/")
        browser.clear("#max-tokens")
        browser.type("#max-tokens", "12000")
        send(browser, "Go on for a long time.")
        # Tokens appear as they arrive: the text grows between polls while it streams.
        lengths = []

        def grown():
            a = browser.js(LAST_ANSWER) or {}
            if a.get("state") == "streaming" and a["text"]:
                if not lengths or len(a["text"]) > lengths[-1]:
                    lengths.append(len(a["text"]))
            return len(lengths) >= 4

        wait_until("the answer to grow", grown, timeout=60, interval=0.1)
        print(f"text lengths while streaming: {lengths}")
        browser.click("#stop")
        stopped_at = time.time()
        answer = wait_until("the stopped state", lambda: (
            lambda a: a if a and a["state"] == "stopped" else None)(browser.js(LAST_ANSWER)))
        assert "(stopped)" in answer["text"], answer
        cancelled = '{method="/v1/chat/completions",code="CANCELLED"}'
        wait_until("the server to cancel", lambda: server.metric("textgen_requests_total",
                                                                 cancelled) == 1, timeout=5)
        wait_until("no active request", lambda: server.metric("textgen_active_requests") == 0,
                   timeout=5)
        took = time.time() - stopped_at
        generated = server.metric("textgen_generated_tokens_total")
        print(f"stopped: cancelled {took:.2f} s after the click, {generated:.0f} of 12000 tokens")
        assert took < 2.0, took
        assert generated < 6000, generated
        length = len(browser.js(LAST_ANSWER)["text"])
        time.sleep(0.5)
        assert len(browser.js(LAST_ANSWER)["text"]) == length  # nothing arrives after Stop
        assert browser.js("return document.getElementById('send').disabled") is False
        browser.screenshot("chat_page_stopped.png")
        print("ok: Stop cancels the generation")
    finally:
        server.stop()


def main():
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} is not installed (scripts/install-deps.sh installs it)")
            return 77
    os.makedirs(OUT_DIR, exist_ok=True)
    browser = Browser()
    try:
        check_streaming_and_conversation(browser)
        check_stop(browser)
    finally:
        browser.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
