// Pure helpers of the page (no DOM): archive ID checks and encoding,
// number formats, plain-words descriptions of routes and errors.
// Tested by web/test/util.test.mjs.

/** Longest archive ID, in bytes of UTF-8 (crates/node/src/id.rs). */
export const MAX_ID_BYTES = 256;

const encoder = new TextEncoder();

/** No lone surrogate (String.prototype.isWellFormed, where it exists). */
function wellFormed(s) {
  if (typeof s.isWellFormed === 'function') return s.isWellFormed();
  return !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

/**
 * Checks an archive ID as the domains do: 1..=256 bytes of UTF-8, no
 * control characters, not `.` or `..` (web addresses read those two as
 * "this folder" and "the folder above", even written `%2E`, so no URL path
 * can carry them and the domains refuse them everywhere). Leading and trailing spaces are removed first (a
 * pasted number often carries them). Returns `{ id }` or `{ error }`, the
 * error in plain words, English then Chinese.
 */
export function checkId(raw) {
  const id = String(raw ?? '').trim();
  if (id === '') {
    return { error: 'Please enter an archive number. 请输入档案号。' };
  }
  if (!wellFormed(id)) {
    return { error: 'The archive number contains a broken character. 档案号中有无法识别的字符。' };
  }
  if (id === '.' || id === '..') {
    return {
      error: `"${id}" is not an archive number: web addresses read it as a folder name, so no domain accepts it. 该档案号无效。`,
    };
  }
  const control = id.match(/[\u0000-\u001f\u007f-\u009f]/);
  if (control) {
    const code = control[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    return {
      error: `The archive number contains an invisible control character (U+${code}); please retype it. 档案号中有不可见的控制字符，请重新输入。`,
    };
  }
  const bytes = encoder.encode(id).length;
  if (bytes > MAX_ID_BYTES) {
    return {
      error: `The archive number is too long: ${bytes} bytes, the limit is ${MAX_ID_BYTES} (a Chinese character takes 3). 档案号过长。`,
    };
  }
  return { id };
}

/**
 * The look-alikes of "·" people type for it (crates/node/src/local/id_profile.rs
 * `LOOKALIKES`): . · ・ ･ • ‧ ∙ ⋅
 */
export const LOOKALIKES = ['.', '\u00b7', '\u30fb', '\uff65', '\u2022', '\u2027', '\u2219', '\u22c5'];

/** Whitespace at either end: JavaScript's \s and U+0085, as the domains trim (White_Space and the BOM). */
const EDGES = /^[\s\u0085]+|[\s\u0085]+$/g;

function readIdOnce(text, separator) {
  const mapped = [...text.normalize('NFKC')]
    .map((c) => (separator && LOOKALIKES.includes(c) ? separator : c))
    .join('');
  return mapped.replace(EDGES, '');
}

/**
 * An archive number as the cluster's ID profile reads what a person typed
 * (`profile.separator`, from /v1/keys' `id_profile`): NFKC, the look-alikes
 * of "·" made the separator, whitespace at either end taken off; twice, as
 * the domains do. web/test/id-profile-vectors.json is read by both tests.
 */
export function normaliseId(typed, profile = { separator: '\u00b7' }) {
  const separator = profile?.separator ?? '';
  return readIdOnce(readIdOnce(String(typed ?? ''), separator), separator);
}

/**
 * The forms a lookup tries, in order: the normalised one, then the one
 * typed if it differs (an ID stored before the profile is found by it).
 */
export function idForms(typed, profile) {
  const normalised = normaliseId(typed, profile);
  return normalised === typed || normalised === '' ? [typed] : [normalised, typed];
}

/**
 * An ID as one URL path segment: encodeURIComponent, with `.` and the
 * marks `! ' ( ) *` escaped too, as the Rust client does (`encode_id`).
 */
export function encodeIdSegment(id) {
  return encodeURIComponent(id).replace(/[.!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

// ---------------------------------------------------------------- numbers

const integer = new Intl.NumberFormat('en-US');

export function formatCount(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return '—';
  return integer.format(typeof n === 'bigint' ? n : Number(n));
}

/** A share (0..1) as a percentage with sensible precision. */
export function formatPercent(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '—';
  if (x === 0) return '0 %';
  const p = x * 100;
  if (p >= 10) return `${p.toFixed(1)} %`;
  if (p >= 0.01) return `${p.toPrecision(2)} %`;
  return `${p.toExponential(1)} %`;
}

/** A false-positive rate: a percentage, or "about 1 in N" for small ones. */
export function formatRate(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '—';
  if (x === 0) return '0';
  if (x >= 0.001) return formatPercent(x);
  const n = 1 / x;
  if (n < 1e6) return `1 in ${formatCount(Math.round(Number(n.toPrecision(2))))}`;
  if (n >= 1e15) return '< 1 in 10¹⁵';
  const [mantissa, exponent] = n.toExponential(1).split('e+');
  return `1 in ${mantissa}×10${superscript(exponent)}`;
}

function superscript(digits) {
  return [...digits].map((d) => '⁰¹²³⁴⁵⁶⁷⁸⁹'[Number(d)]).join('');
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(2)} MB`;
}

export function formatMs(ms) {
  if (!Number.isFinite(ms)) return '—';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  return `${Math.round(ms)} ms`;
}

/** "just now 刚刚", "5 s ago 5 秒前", "3 min ago 3 分钟前". */
export function formatAgo(ms) {
  if (!Number.isFinite(ms)) return 'never 从未';
  if (ms < 1500) return 'just now 刚刚';
  if (ms < 90_000) return `${Math.round(ms / 1000)} s ago ${Math.round(ms / 1000)} 秒前`;
  return `${Math.round(ms / 60_000)} min ago ${Math.round(ms / 60_000)} 分钟前`;
}

// ---------------------------------------------------------------- words

const RETENTION = { Y: '永久 permanent', D30: '30 年 30 years', D10: '10 年 10 years' };

/** Labels for the metadata keys the sample records use. */
export const METADATA_LABELS = {
  fonds: '全宗号 Fonds',
  category: '门类 Category',
  year: '年度 Year',
  retention: '保管期限 Retention',
  department: '部门 Department',
  pages: '页数 Pages',
};

/** A metadata value for people. */
export function metadataValue(key, value) {
  if (key === 'retention' && typeof value === 'string' && RETENTION[value]) {
    return `${value} · ${RETENTION[value]}`;
  }
  if (value === null) return '—';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

const list = (names) => names.map((n) => `domain ${n}`).join(', ');
const listZh = (names) => names.join('、');

/**
 * The steps a server lookup took (the `route` of /v1/lookup), in plain
 * words, one string per step.
 */
export function describeRoute(route, { served, owner, found }) {
  if (!route) return [];
  const steps = [];
  const at = `Domain ${served}`;
  const zh = `档案域 ${served}`;
  if (route.strategy === 'broadcast') {
    steps.push(`${at} asked every domain to check its own filter (broadcast, as asked). ${zh}按要求请所有档案域检查各自的过滤器（广播）。`);
  } else if (route.local) {
    steps.push(`${at}, which serves this page, found it in its own store. 本页所在的${zh}在自己的存储中找到了它。`);
  } else {
    steps.push(`${at} checked its own filter and store: not there. ${zh}检查了自己的过滤器和存储：没有。`);
    if (route.candidates && route.candidates.length > 0) {
      steps.push(`${at}'s copies of the other domains' filters pointed to ${list(route.candidates)}. ${zh}持有的其他档案域过滤器副本指向档案域 ${listZh(route.candidates)}。`);
    } else {
      steps.push(`${at}'s copies of the other domains' filters pointed to no domain. ${zh}持有的其他档案域过滤器副本未指向任何档案域。`);
    }
  }
  if (route.asked && route.asked.length > 0 && route.strategy !== 'broadcast') {
    steps.push(`Asked ${list(route.asked)} for the record. 向档案域 ${listZh(route.asked)} 查询该档案。`);
  }
  if (route.false_positive_hops > 0) {
    const n = route.false_positive_hops;
    steps.push(`${n} domain${n > 1 ? 's' : ''} said "maybe" but did not hold it (a filter false positive). ${n} 个档案域答“可能有”但并未持有（过滤器误报）。`);
  }
  if (route.broadcast && route.strategy !== 'broadcast') {
    const probed = route.probed && route.probed.length > 0;
    const who = probed ? list(route.probed) : 'the other domains'; // i18n: part of a sentence translated below
    const whoZh = probed ? `档案域 ${listZh(route.probed)}` : '其他档案域';
    steps.push(`A copy was not known to be up to date, so ${who} checked their live filters (broadcast). 有副本不确定是否最新，因此由${whoZh}检查了各自的实时过滤器（广播）。`);
  }
  if (route.unreachable && route.unreachable.length > 0) {
    steps.push(`Could not reach ${list(route.unreachable)}. 无法连接档案域 ${listZh(route.unreachable)}。`);
  }
  if (found) steps.push(`Found in domain ${owner}. 在档案域 ${owner} 找到。`);
  return steps;
}

/**
 * A failed API call in plain words. `err` is what `callApi` throws:
 * `{ status, code, message }` (status 0: the domain could not be reached).
 */
/**
 * Whether an answer says the record is not there: the API's `not_found`
 * only, never another 404 (a wrong route is an error, not an absence).
 */
export function isAbsent(answer) {
  return answer.status === 404 && answer.body?.code === 'not_found';
}

export function plainApiError(domain, err) {
  const who = `Domain ${domain}`;
  const zh = `档案域 ${domain}`;
  if (!err || err.status === 0) {
    return `${who} could not be reached. Check that it is running. 无法连接${zh}，请确认其正在运行。`;
  }
  const said = err.message ? `: ${err.message}` : '';
  switch (err.code) {
    case 'invalid_id':
      return `${who} refused the archive number${said}. ${zh}拒绝了该档案号：格式无效。`;
    case 'invalid_record':
    case 'invalid_json':
      return `${who} refused the record${said}. ${zh}拒绝了该记录：内容无效。`;
    case 'invalid_key':
      return `${who} refused the key${said}. ${zh}拒绝了该证件号码：格式无效（号码本身不会被显示）。`;
    case 'content_too_large':
    case 'body_too_large':
      return `The attachment is too large for ${who.toLowerCase()}${said}. 附件超过${zh}允许的大小。`;
    case 'coordinator_unavailable':
      return `${who} cannot accept changes right now: it has lost contact with the cluster coordinator. Nothing was changed; try again shortly. ${zh}与集群协调服务失去联系，暂时无法修改，未做任何更改，请稍后再试。`;
    case 'not_published':
      return `${who} saved the change, but the other domains may not know of it yet. Repeating the request is safe. ${zh}已保存，但其他档案域可能尚未得知；重复提交是安全的。`;
    case 'insufficient_storage':
      return `${who} has no room left on its disk, so nothing was changed. Its operator must free space; writes resume by themselves. ${zh}磁盘已满，未做任何更改；需由管理员释放空间，之后会自动恢复写入。`;
    case 'store_unavailable':
      return `${who} is reopening its store after a disk error; nothing was changed. Try again in a moment. ${zh}正在磁盘错误后重新打开存储，未做任何更改，请稍后再试。`;
    case 'not_found':
      return `${who} does not hold this archive number. ${zh}没有该档案。`;
    case 'not_ready':
      return `${who} cannot confirm the cluster's membership yet, so it cannot say a record is absent. Try again shortly. ${zh}暂时无法确认集群成员，因此不能断定档案不存在，请稍后再试。`;
    case 'unavailable':
      return `Some domains could not be reached${said}. 部分档案域无法连接，结果可能不完整。`;
    case 'unauthorized':
      return `${who} needs an API token: enter one at the top of the page. ${zh}需要访问令牌，请在页面顶部输入。`;
    case 'forbidden':
      return `${who} refused: your token does not allow this${said}. ${zh}拒绝：当前令牌无此权限。`;
    case 'rate_limited':
      return `${who} is receiving too many requests from this token; wait a moment and try again. ${zh}收到该令牌的请求过多，请稍候再试。`;
    case 'overloaded':
    case 'timeout':
      return `${who} is too busy to answer now; try again shortly. ${zh}当前过于繁忙，请稍后再试。`;
    case 'route_not_found':
    case 'method_not_allowed':
      return `${who} does not offer this request (HTTP ${err.status}); the page and the domain may be of different versions. ${zh}不支持该请求，页面与档案域的版本可能不一致。`;
    default:
      if (err.status >= 500) return `${who} had an internal problem (HTTP ${err.status})${said}. ${zh}内部错误（HTTP ${err.status}）。`;
      return `${who} answered HTTP ${err.status}${said || `: ${err.code || 'no details'}`}. ${zh}返回 HTTP ${err.status}。`;
  }
}
