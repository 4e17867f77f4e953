// The Request dialog's examples: a request for each path shape (OpenAI chat streamed, KServe v2,
// TorchServe) in each client (curl, Python openai/httpx, JavaScript openai/fetch). Every example
// reads the token from $SLUICE_TOKEN: the page never holds one.

/** Model names allowed into an example (they go into a URL path and a shell-quoted body). */
export const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** What to do with an example, per client. */
export const NOTES = {
  curl: 'Run it in a shell after the export above. -N prints each event as it arrives.',
  'python-openai': 'pip install openai; save as request.py and run python request.py.',
  'python-httpx': 'pip install httpx; save as request.py and run python request.py.',
  'js-openai': 'npm install openai; save as request.mjs and run node request.mjs (Node 20 or later).',
  'js-fetch': 'Save as request.mjs and run node request.mjs (Node 20 or later, no packages needed).',
};

const PROMPT = 'Hello there';

/** The request body and path of a shape. */
function shapeOf(shape, model) {
  if (shape === 'chat') {
    return { path: '/v1/chat/completions', body: { model, stream: true, messages: [{ role: 'user', content: PROMPT }] }, stream: true };
  }
  if (shape === 'kserve') {
    return { path: `/v2/models/${model}/infer`, body: { inputs: [{ name: 'INPUT0', shape: [4], datatype: 'FP32', data: [1, 2, 3, 4] }] }, stream: false };
  }
  return { path: `/predictions/${model}`, body: { data: PROMPT }, stream: false };
}

export function snippet(shape, client, base, model) {
  const s = shapeOf(shape, model);
  const url = `${base}/request${s.path}`;
  const json = JSON.stringify(s.body);
  switch (client) {
    case 'curl':
      return [
        `curl -N ${base.includes('[') ? '-g ' : ''}${url} \\`,
        `  -H "Authorization: Bearer $SLUICE_TOKEN" \\`,
        `  -H 'Content-Type: application/json' \\`,
        `  -d '${json}'`,
      ].join('\n');
    case 'python-openai':
      return [
        'import os',
        'from openai import OpenAI',
        '',
        'client = OpenAI(',
        `    base_url="${base}/request/v1",`,
        '    api_key=os.environ["SLUICE_TOKEN"],',
        ')',
        'stream = client.chat.completions.create(',
        `    model="${model}",`,
        `    messages=[{"role": "user", "content": "${PROMPT}"}],`,
        '    stream=True,',
        ')',
        'for chunk in stream:',
        '    if chunk.choices:',
        '        print(chunk.choices[0].delta.content or "", end="", flush=True)',
        'print()',
      ].join('\n');
    case 'python-httpx':
      return [
        'import os',
        'import httpx',
        '',
        `url = "${url}"`,
        'headers = {"Authorization": f"Bearer {os.environ[\'SLUICE_TOKEN\']}"}',
        `body = ${pythonLiteral(s.body)}`,
        '# A cold service answers once a replica has started: allow for it.',
        'timeout = httpx.Timeout(600.0, connect=10.0)',
        '',
        ...(s.stream
          ? [
              'with httpx.stream("POST", url, headers=headers, json=body, timeout=timeout) as response:',
              '    response.raise_for_status()',
              '    for line in response.iter_lines():',
              '        if line.startswith("data: ") and line != "data: [DONE]":',
              '            print(line[len("data: "):], flush=True)',
            ]
          : ['response = httpx.post(url, headers=headers, json=body, timeout=timeout)', 'response.raise_for_status()', 'print(response.json())']),
      ].join('\n');
    case 'js-openai':
      return [
        "import OpenAI from 'openai';",
        '',
        'const client = new OpenAI({',
        `  baseURL: '${base}/request/v1',`,
        '  apiKey: process.env.SLUICE_TOKEN,',
        '});',
        'const stream = await client.chat.completions.create({',
        `  model: '${model}',`,
        `  messages: [{ role: 'user', content: '${PROMPT}' }],`,
        '  stream: true,',
        '});',
        'for await (const chunk of stream) {',
        "  process.stdout.write(chunk.choices[0]?.delta?.content ?? '');",
        '}',
        "process.stdout.write('\\n');",
      ].join('\n');
    case 'js-fetch':
      return [
        `const response = await fetch('${url}', {`,
        "  method: 'POST',",
        '  headers: {',
        '    Authorization: `Bearer ${process.env.SLUICE_TOKEN}`,',
        "    'Content-Type': 'application/json',",
        '  },',
        `  body: JSON.stringify(${jsLiteral(s.body)}),`,
        '});',
        'if (!response.ok) throw new Error(`${response.status}: ${await response.text()}`);',
        ...(s.stream
          ? ['const decoder = new TextDecoder();', 'for await (const chunk of response.body) {', '  process.stdout.write(decoder.decode(chunk, { stream: true }));', '}']
          : ['console.log(await response.json());']),
      ].join('\n');
    default:
      return '';
  }
}

/** A value written as Python: `{"key": 1, "ok": True}`. */
function pythonLiteral(value) {
  if (Array.isArray(value)) return `[${value.map(pythonLiteral).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pythonLiteral(v)}`).join(', ')}}`;
  }
  if (value === true) return 'True';
  if (value === false) return 'False';
  return JSON.stringify(value);
}

/** A value written as JavaScript: `{ key: 1, text: 'hi' }`. */
function jsLiteral(value) {
  if (Array.isArray(value)) return `[${value.map(jsLiteral).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    return `{ ${Object.entries(value).map(([k, v]) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : `'${k}'`}: ${jsLiteral(v)}`).join(', ')} }`;
  }
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  return JSON.stringify(value);
}
