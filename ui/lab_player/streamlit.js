// The player's talk with Streamlit (component messages, API version 1): ready, render, value, height.
const send = (type, extra) => window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type }, extra), "*");

/** Call `handler(args)` on every render Streamlit sends (args: docs/player.md, PlayerArgs). */
export function onRender(handler) {
  window.addEventListener("message", (e) => {
    if (e.data && e.data.type === "streamlit:render") handler(e.data.args);
  });
}
/** The value the page reads back (`{step, block, nonce}`). */
export function sendValue(value) { send("streamlit:setComponentValue", { value, dataType: "json" }); }
/** The frame follows the content's height. */
export function height() { send("streamlit:setFrameHeight", { height: Math.ceil(document.getElementById("player").scrollHeight + 4) }); }
export function ready() { send("streamlit:componentReady", { apiVersion: 1 }); }
