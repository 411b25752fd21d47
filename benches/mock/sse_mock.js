// An SSE upstream independent of Ringside's simulator (benches/held_streams_oha.sh): each request
// is answered with EVENTS OpenAI-style chunks INTERVAL ms apart, then [DONE], by Node's own http,
// or over TLS by Node's https when TLS_CERT and TLS_KEY name PEM files. BACKLOG: the listen
// queue (Node's default, 511, unless set): with 5,000 streams a proxy's first wave of connects
// overflows 511, and the dropped SYNs come back 1 s and 3 s later as slow streams.
// GET /events answers how many events (chunks and [DONE]) it has written so far: the count of
// events a proxy relayed, cut streams' included, which oha's count of whole streams leaves out.
const fs = require('fs');
const EVENTS = +(process.env.EVENTS || 50), INTERVAL = +(process.env.INTERVAL || 100);
const port = +(process.argv[2] || 19600);
const tls = process.env.TLS_CERT && process.env.TLS_KEY
  ? { cert: fs.readFileSync(process.env.TLS_CERT), key: fs.readFileSync(process.env.TLS_KEY) }
  : null;
let written = 0;
const handler = (req, res) => {
  if (req.method === 'GET' && req.url === '/events') {
    res.end(String(written));
    return;
  }
  req.on('data', () => {});
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let i = 0;
    const t = setInterval(() => {
      if (i < EVENTS) {
        res.write(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok${i} "},"finish_reason":null}]}\n\n`);
        i++;
        written++;
      } else {
        clearInterval(t);
        res.end('data: [DONE]\n\n');
        written++;
      }
    }, INTERVAL);
    res.on('close', () => clearInterval(t));
  });
};
const srv = tls ? require('https').createServer(tls, handler) : require('http').createServer(handler);
srv.keepAliveTimeout = 60000;
srv.maxConnections = 30000;
srv.listen(port, '127.0.0.1', +(process.env.BACKLOG || 511));
