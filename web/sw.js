// /sw.js: the pages' service worker. It shows a notice that vigild sent through Web Push
// (docs/design/alerts.md, "Notices") and opens its page when the notification is tapped.
//
// The decrypted payload is `{"v":1,"notice":ID,"kind":..,"circle":C,"stream":S?,"status":..?,
// "at":unixms,"url":"/watch#stream=S&circle=C" or "/circle#circle=C"}`: ids and a kind, never a
// token, a name, a place or a note. The page that opens finds the member's (or owner's) token for
// the circle in this browser's own storage; nothing here reads it, and nothing secret is ever
// put into a notification.

const TEXTS = {
  panic_started: (n) => (n.status === 'amber'
    ? ['Someone in your circle feels uneasy', 'They share their live location with you. Tap to keep an eye on them.']
    : ['Danger alert from your circle', 'Someone in your circle is in danger. Tap to see their live location.']),
  panic_escalated: () => ['Danger alert: missed check-in', 'Someone in your circle did not check in in time. Tap to see their last location.'],
  panic_ended: () => ['Sharing ended in your circle', 'The person stopped sharing their location. Tap to see how it ended.'],
  checkin_requested: () => ['Check-in: are you safe?', 'Someone in your circle asks whether you are safe. Tap to answer.'],
  checkin_answered: () => ['Check-in answered', 'Your circle has an answer to "are you safe?". Tap to see it.'],
};

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The notification a notice becomes: `{title, options}`, or null for a payload that is not a
 * notice of a kind this page knows (it is shown as a plain "news from your circle" instead, so a
 * newer server's kinds still reach the person: a push that shows nothing is against the rules of
 * `userVisibleOnly`).
 */
function noticeNotification(n) {
  if (!n || typeof n !== 'object' || !ID.test(n.circle ?? '')) return null;
  const stream = ID.test(n.stream ?? '') ? n.stream : null;
  const text = TEXTS[n.kind];
  const [title, body] = text ? text(n) : ['News from your circle', 'Tap to open your circle.'];
  const danger = (n.kind === 'panic_started' && n.status !== 'amber') || n.kind === 'panic_escalated';
  return {
    title,
    options: {
      body,
      // A newer notice of the same stream (or circle) replaces the older one on the screen.
      tag: stream ?? n.circle,
      renotify: true,
      requireInteraction: danger,
      timestamp: Number.isFinite(n.at) ? n.at : Date.now(),
      data: { url: noticeURL(n, stream), notice: typeof n.notice === 'string' ? n.notice : null, kind: n.kind ?? null },
    },
  };
}

/** The page to open: the payload's own URL when it is one of ours, else made from the ids. */
function noticeURL(n, stream) {
  if (typeof n.url === 'string' && /^\/(watch|circle)#[A-Za-z0-9_=&-]*$/.test(n.url)) return n.url;
  return stream ? `/watch#stream=${stream}&circle=${n.circle}` : `/circle#circle=${n.circle}`;
}

async function showNotice(data) {
  let notice = null;
  try {
    notice = data ? data.json() : null;
  } catch { /* not JSON: the plain notification below */ }
  const shown = noticeNotification(notice) ?? { title: 'Vigil', options: { body: 'News from your circle. Tap to open it.', data: { url: '/circle' } } };
  await self.registration.showNotification(shown.title, shown.options);
}

/**
 * What a tap does: a window of this site already showing the notice's page is brought to the
 * front; otherwise a new one opens on it. Runs in `notificationclick` (the only event in which a
 * service worker may focus or open a window).
 */
async function openNotice(notification) {
  const url = new URL(notification.data?.url ?? '/circle', self.location.origin).href;
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const same = windows.find((c) => c.url === url);
  if (same) return same.focus();
  return self.clients.openWindow(url);
}

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
self.addEventListener('push', (event) => event.waitUntil(showNotice(event.data)));
self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  event.waitUntil(openNotice(event.notification));
});

// D (not built yet, docs/design/alerts.md "Acknowledgements"): once vigild has `checkin.ack`, the
// page opened by a tap acknowledges the notice (`data.notice`) with the member's token, which
// only the page holds; the service worker has no token and sends nothing itself.
