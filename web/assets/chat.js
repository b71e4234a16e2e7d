// The chat page: streamed chat completions and image generation/editing against this gateway.
import { ApiProblem, api, apiJson, el, fmt, getKey, getPref, refreshQuota, setPref, setupKeyBar, showProblem } from './common.js';

const $ = (id) => document.getElementById(id);
const log = $('log');
const problem = $('problem');
const quota = $('quota');
const modelSelect = $('model');
const effortSelect = $('effort');
const sizeSelect = $('size');
const prompt = $('prompt');
const promptLabel = $('prompt-label');
const sendButton = $('send');
const stopButton = $('stop');
const sourceFile = $('source-file');
const sourceUrl = $('source-url');
const sourcePreview = $('source-preview');
const sourceThumb = $('source-thumb');
const sourceName = $('source-name');
const sourceClear = $('source-clear');

const MAX_IMAGE_PROMPT = 8000;
const MAX_SOURCE_BYTES = 20 * 1024 * 1024;

/** The text conversation sent with each chat call (image turns are not part of it). */
let history = [];
/** id -> multiplier, from GET /v1/models. */
const models = new Map();
let sourceDataUri = null;
/** Object URLs of the images shown, released with the conversation. */
const imageUrls = [];
let inFlight = null;

const keyBar = setupKeyBar({
  onChange: () => {
    problem.replaceChildren();
    loadModels();
    refreshQuota(quota);
  },
});
const focusKey = () => keyBar.focus();

// ---- mode -------------------------------------------------------------------------------------

const mode = () => (document.querySelector('input[name="mode"]:checked')?.value === 'image' ? 'image' : 'chat');

function applyMode() {
  const m = mode();
  for (const node of document.querySelectorAll('[data-mode]')) node.hidden = node.dataset.mode !== m;
  promptLabel.textContent = m === 'image' ? 'Image prompt' : 'Your message';
  prompt.placeholder = m === 'image' ? 'Describe the image to draw, or the change to make…' : 'Write a message…';
  sendButton.textContent = m === 'image' ? 'Create image' : 'Send';
  setPref('mode', m);
}
for (const radio of document.querySelectorAll('input[name="mode"]')) radio.addEventListener('change', applyMode);
if (getPref('mode', 'chat') === 'image') $('mode-image').checked = true;
effortSelect.value = getPref('effort', 'none');
sizeSelect.value = getPref('size', '1024x1024');
effortSelect.addEventListener('change', () => setPref('effort', effortSelect.value));
sizeSelect.addEventListener('change', () => setPref('size', sizeSelect.value));
modelSelect.addEventListener('change', () => setPref('model', modelSelect.value));
applyMode();

// ---- models -----------------------------------------------------------------------------------

async function loadModels() {
  models.clear();
  if (!getKey()) {
    modelSelect.replaceChildren(el('option', { value: '' }, 'Enter your key to load the models'));
    modelSelect.disabled = true;
    return;
  }
  modelSelect.replaceChildren(el('option', { value: '' }, 'Loading models…'));
  modelSelect.disabled = true;
  try {
    const list = await apiJson('models');
    const data = Array.isArray(list.data) ? list.data : [];
    for (const m of data) models.set(m.id, Number(m.multiplier ?? 1));
    if (data.length === 0) {
      modelSelect.replaceChildren(el('option', { value: '' }, 'No models are enabled in your plan'));
      return;
    }
    modelSelect.replaceChildren(...data.map((m) => el('option', { value: m.id }, `${m.id} — ×${Number(m.multiplier ?? 1)}`)));
    const wanted = getPref('model', '');
    if (models.has(wanted)) modelSelect.value = wanted;
    modelSelect.disabled = false;
  } catch (err) {
    modelSelect.replaceChildren(el('option', { value: '' }, 'Models could not be loaded'));
    showProblem(problem, err, { onKey: focusKey });
  }
}

// ---- source image (image mode) ----------------------------------------------------------------

function clearSource() {
  sourceDataUri = null;
  sourceFile.value = '';
  sourceUrl.value = '';
  sourcePreview.hidden = true;
  sourceThumb.removeAttribute('src');
  sourceName.textContent = '';
  sourceClear.hidden = true;
}

sourceFile.addEventListener('change', () => {
  const file = sourceFile.files?.[0];
  sourceDataUri = null;
  if (!file) {
    clearSource();
    return;
  }
  if (!file.type.startsWith('image/')) {
    showProblem(problem, clientProblem('The chosen file is not an image. Choose a PNG, JPEG, WebP or GIF file.', 'image'));
    clearSource();
    return;
  }
  if (file.size > MAX_SOURCE_BYTES) {
    showProblem(problem, clientProblem(`The chosen image is ${(file.size / 1048576).toFixed(1)} MB; the limit is 20 MB.`, 'image'));
    clearSource();
    return;
  }
  sourceUrl.value = '';
  const reader = new FileReader();
  reader.onload = () => {
    sourceDataUri = String(reader.result);
    sourceThumb.src = sourceDataUri;
    sourceName.textContent = file.name;
    sourcePreview.hidden = false;
    sourceClear.hidden = false;
  };
  reader.onerror = () => showProblem(problem, clientProblem('The chosen file could not be read.', 'image'));
  reader.readAsDataURL(file);
});

sourceUrl.addEventListener('input', () => {
  if (sourceUrl.value.trim()) {
    sourceDataUri = null;
    sourceFile.value = '';
    sourcePreview.hidden = true;
    sourceClear.hidden = false;
  } else if (!sourceDataUri) {
    sourceClear.hidden = true;
  }
});
sourceClear.addEventListener('click', () => {
  clearSource();
  sourceFile.focus();
});

function clientProblem(message, param = null) {
  return new ApiProblem(0, { message, type: 'client_error', code: 'client_error', param });
}

// ---- conversation frame -----------------------------------------------------------------------

function nearBottom() {
  return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
}
function scrollDown(force = false) {
  if (force || nearBottom()) log.scrollTop = log.scrollHeight;
}

function addMessage(role, ...content) {
  $('empty')?.remove();
  const who = role === 'user' ? 'You' : 'Assistant';
  const body = el('div', { class: 'bubble-body' }, ...content);
  const msg = el('article', { class: `message ${role}`, 'aria-label': `${who} said` }, el('p', { class: 'who' }, who), body);
  log.append(msg);
  scrollDown(true);
  return { msg, body };
}

function pendingIndicator(text) {
  return el(
    'span',
    { class: 'pending' },
    el('span', { class: 'dots', 'aria-hidden': 'true' }, el('span'), el('span'), el('span')),
    el('span', { class: 'pending-text' }, text),
  );
}

function setBusy(controller) {
  inFlight = controller;
  const busy = !!controller;
  sendButton.disabled = busy;
  stopButton.hidden = !busy;
  log.setAttribute('aria-busy', busy ? 'true' : 'false');
}
stopButton.addEventListener('click', () => inFlight?.abort());

function currentModel() {
  const id = modelSelect.value;
  if (!getKey()) throw new ApiProblem(401, { message: 'No API key entered yet.', code: 'missing_api_key' });
  if (!id) throw clientProblem('Pick a model first. If the list is empty, check your API key.', 'model');
  return id;
}

// ---- chat (streamed) --------------------------------------------------------------------------

/** Server-sent events from a fetch response: yields the data of each event. */
async function* sseData(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) yield data;
    }
  }
}

async function sendChat(text) {
  const model = currentModel();
  const effort = effortSelect.value;
  const messages = [...history, { role: 'user', content: text }];
  const userMsg = addMessage('user', el('p', { class: 'text' }, text));
  const { msg, body } = addMessage('assistant', pendingIndicator('Waiting for the reply…'));
  msg.dataset.state = 'streaming';
  const textNode = el('p', { class: 'text' });
  const controller = new AbortController();
  setBusy(controller);
  let content = '';
  let usage = null;
  let finished = false;
  try {
    const res = await api('chat/completions', {
      method: 'POST',
      signal: controller.signal,
      body: { model, messages, stream: true, stream_options: { include_usage: true }, ...(effort !== 'none' ? { reasoning_effort: effort } : {}) },
    });
    for await (const data of sseData(res)) {
      if (data === '[DONE]') {
        finished = true;
        break;
      }
      let chunk;
      try {
        chunk = JSON.parse(data);
      } catch {
        continue;
      }
      if (chunk.error) throw new ApiProblem(chunk.error.type === 'upstream_error' ? 502 : 500, chunk.error);
      const delta = chunk.choices?.[0]?.delta?.content;
      if (delta) {
        if (!content) body.replaceChildren(textNode);
        content += delta;
        textNode.textContent = content;
        scrollDown();
      }
      if (chunk.usage) usage = chunk.usage;
    }
    if (!finished) throw new ApiProblem(502, { message: 'The reply stream ended before it was complete.', type: 'upstream_error', code: 'stream_incomplete' });
    if (!content) body.replaceChildren(el('p', { class: 'text muted' }, '(empty reply)'));
    history = [...messages, { role: 'assistant', content }];
    msg.dataset.state = 'done';
    const meta = [model, effort !== 'none' ? `effort ${effort}` : null];
    if (usage) {
      const mult = models.get(model) ?? 1;
      meta.push(
        `${fmt(usage.prompt_tokens)} in + ${fmt(usage.completion_tokens)} out = ${fmt(usage.total_tokens)} tokens`,
        `≈ ${fmt(Math.ceil(usage.total_tokens * mult))} billed (×${mult})`,
      );
    }
    msg.append(el('p', { class: 'meta' }, meta.filter(Boolean).join(' · ')));
  } catch (err) {
    if (err?.name === 'AbortError') {
      msg.dataset.state = 'stopped';
      if (!content) body.replaceChildren(el('p', { class: 'text muted' }, 'Stopped before the reply began.'));
      else history = [...messages, { role: 'assistant', content }];
      msg.append(el('p', { class: 'meta' }, 'Stopped: you are charged for the prompt and the part already received.'));
    } else {
      msg.dataset.state = 'failed';
      if (content) {
        msg.append(el('p', { class: 'meta warn' }, 'The reply was cut off: see the error below.'));
      } else {
        msg.remove();
        userMsg.msg.classList.add('failed');
        userMsg.msg.append(el('p', { class: 'meta warn' }, 'Not answered: see the error below. Your text is back in the message box.'));
        if (!prompt.value) prompt.value = text;
      }
      throw err;
    }
  } finally {
    setBusy(null);
  }
}

// ---- images -----------------------------------------------------------------------------------

function jpegBlob(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Blob([bytes], { type: 'image/jpeg' });
}

async function sendImage(text) {
  const model = currentModel();
  if (text.length > MAX_IMAGE_PROMPT)
    throw clientProblem(`The image prompt is ${fmt(text.length)} characters; the limit is ${fmt(MAX_IMAGE_PROMPT)}. Shorten it and try again.`, 'prompt');
  const size = sizeSelect.value;
  const url = sourceUrl.value.trim();
  let image = sourceDataUri;
  if (!image && url) {
    let parsed = null;
    try {
      parsed = new URL(url);
    } catch {
      /* handled below */
    }
    if (!parsed || parsed.protocol !== 'https:') throw clientProblem('The source image URL must be a full https:// address.', 'image');
    image = parsed.href;
  }
  const userParts = [el('p', { class: 'text' }, text)];
  if (sourceDataUri) userParts.push(el('img', { class: 'source-thumb', src: sourceDataUri, alt: 'Source image' }));
  else if (image) userParts.push(el('p', { class: 'meta' }, `Source: ${image}`));
  const userMsg = addMessage('user', ...userParts);
  const { msg, body } = addMessage(
    'assistant',
    pendingIndicator(image ? 'Editing the image… this takes about 10 to 20 seconds.' : 'Drawing the image… this takes about 10 to 20 seconds.'),
  );
  msg.dataset.state = 'working';
  const controller = new AbortController();
  setBusy(controller);
  try {
    const res = await api(image ? 'images/edits' : 'images/generations', {
      method: 'POST',
      signal: controller.signal,
      body: { model, prompt: text, size, n: 1, response_format: 'b64_json', ...(image ? { image } : {}) },
    });
    const billed = res.headers.get('x-tollgate-billed-tokens');
    const result = await res.json();
    const b64 = result?.data?.[0]?.b64_json;
    if (typeof b64 !== 'string' || !b64)
      throw new ApiProblem(502, { message: 'The gateway answered without an image.', type: 'upstream_error', code: 'no_image' });
    const href = URL.createObjectURL(jpegBlob(b64));
    imageUrls.push(href);
    const [w, h] = size.split('x').map(Number);
    const img = el('img', { class: 'result', src: href, alt: `Generated image: ${text.slice(0, 200)}`, width: w, height: h });
    await new Promise((resolve) => {
      img.onload = resolve;
      img.onerror = resolve;
      body.replaceChildren(img);
    });
    const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
    const download = el('a', { class: 'button secondary small', href, download: `tollgate-${stamp}.jpg` }, 'Download image');
    msg.append(
      el(
        'div',
        { class: 'image-actions' },
        download,
        el(
          'span',
          { class: 'meta' },
          [model, size.replace('x', ' × '), image ? 'edit' : null, billed ? `${fmt(billed)} tokens billed` : null].filter(Boolean).join(' · '),
        ),
      ),
    );
    msg.dataset.state = 'done';
    scrollDown(true);
  } catch (err) {
    msg.remove();
    userMsg.msg.classList.add('failed');
    if (err?.name === 'AbortError') {
      userMsg.msg.append(el('p', { class: 'meta' }, 'Stopped: nothing was charged.'));
      return;
    }
    userMsg.msg.append(el('p', { class: 'meta warn' }, 'No image: see the error below. Your prompt is back in the box.'));
    if (!prompt.value) prompt.value = text;
    throw err;
  } finally {
    setBusy(null);
  }
}

// ---- composer ---------------------------------------------------------------------------------

$('composer').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  if (inFlight) return;
  const text = prompt.value.trim();
  if (!text) {
    prompt.focus();
    return;
  }
  problem.replaceChildren();
  prompt.value = '';
  try {
    if (mode() === 'image') await sendImage(text);
    else await sendChat(text);
  } catch (err) {
    if (!prompt.value) prompt.value = text;
    showProblem(problem, err, { onKey: focusKey });
    scrollDown(true);
    if (err instanceof ApiProblem && err.status === 403) loadModels();
  } finally {
    if (getKey()) refreshQuota(quota);
    prompt.focus();
  }
});

prompt.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});

$('new-chat').addEventListener('click', () => {
  inFlight?.abort();
  history = [];
  for (const url of imageUrls.splice(0)) URL.revokeObjectURL(url);
  problem.replaceChildren();
  log.replaceChildren(
    el(
      'div',
      { class: 'empty', id: 'empty' },
      el('p', { class: 'empty-title' }, 'New conversation'),
      el('p', {}, 'Earlier messages are no longer sent to the model.'),
    ),
  );
  prompt.focus();
});

loadModels();
refreshQuota(quota);
