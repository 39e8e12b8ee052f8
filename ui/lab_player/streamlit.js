// The player's talk with Streamlit (component messages, API version 1): ready, render, value, height.
const send = (type, extra) => window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type }, extra), "*");

const utf8 = new TextDecoder();
const parse = (bytes) => JSON.parse(utf8.decode(bytes));
let timelines = { key: null, data: null, other: null };  // the parsed timelines of the newest data_id

/** Call `handler(args)` on every render Streamlit sends (args: docs/player.md, PlayerArgs). The timelines
 * arrive as JSON bytes (`data`, and Compare's `other_data`); each is parsed once per `data_id`. */
export function onRender(handler) {
  window.addEventListener("message", (e) => {
    if (!(e.data && e.data.type === "streamlit:render")) return;
    const { data, other_data: otherData, ...args } = e.data.args;
    const key = `${args.data_id}|${otherData ? otherData.length : 0}`;
    if (key !== timelines.key) timelines = { key, data: parse(data), other: otherData ? parse(otherData) : null };
    handler({ ...args, data: timelines.data, other: args.other ? { ...args.other, data: timelines.other } : null });
  });
}
/** The value the page reads back (`{step, block, nonce}`). */
export function sendValue(value) { send("streamlit:setComponentValue", { value, dataType: "json" }); }
/** The frame follows the content's height. */
export function height() { send("streamlit:setFrameHeight", { height: Math.ceil(document.getElementById("player").scrollHeight + 4) }); }
export function ready() { send("streamlit:componentReady", { apiVersion: 1 }); }
