#!/usr/bin/env python3
"""The cost table of bench/README.md from two `perf record -e cpu-clock -F HZ` profiles of one
server process: each symbol's samples grouped by what it does, in microseconds per call.

    bench/cost_table.py mcp.data MCP_CALLS oxp.data OXP_CALLS [HZ]

(the calls: what wrk reported for each profile's run). Python 3, standard library only."""
import re, subprocess, sys
def load(path):
    out=subprocess.run(['perf','report','-i',path,'--no-children','--sort','sym','--stdio','-F','sample,sym'],capture_output=True,text=True).stdout
    d={}
    for l in out.split('\n'):
        m=re.match(r'^\s+(\d+)\s+\[(.)\]\s+(.*)$',l)
        if m: d[(m.group(2),m.group(3).strip())]=int(m.group(1))
    return d
files={'mcp':sys.argv[1],'oxp':sys.argv[3]}
reqs={'mcp':int(sys.argv[2]),'oxp':int(sys.argv[4])}
hz=float(sys.argv[5]) if len(sys.argv)>5 else 4000.0
cats=[
 ('kernel (sockets, scheduling, interrupts)', lambda k,s: k=='k'),
 ('memmove (futures and structs moved)', lambda k,s: 'memmove' in s or 'memcpy' in s),
 ('allocator (malloc, free, consolidation)', lambda k,s: re.search(r'malloc|_int_free|cfree|^free|realloc|__rdl_|__rust_alloc|__rust_dealloc|unlink_chunk|tcache',s) is not None),
 ('HTTP/1 parse and header maps (hyper, httparse, http)', lambda k,s: re.search(r'hyper::proto::h1::role|httparse|HeaderName|header::map|HeaderValue',s) is not None),
 ('JSON read (serde_json, the envelope/param visitors)', lambda k,s: re.search(r'serde_json::de|serde_json::read|SliceRead|Deserialize|Visitor|MapAccess|from_utf8|deserialize',s) is not None),
 ('JSON write', lambda k,s: re.search(r'serde_json::ser|format_escaped|Serialize|encode::message|zmij|itoa|ryu',s) is not None),
 ('tracing (the call span, the filter)', lambda k,s: 'tracing' in s),
 ('MCP transport and dispatch (oxp_runtime::mcp)', lambda k,s: 'oxp_runtime::mcp' in s),
 ('OXP front (oxp_runtime::server)', lambda k,s: 'oxp_runtime::server' in s),
 ('pipeline and tool (oxp_core, jsonschema, the tool)', lambda k,s: re.search(r'oxp_core|jsonschema|mcp_oxp|referencing',s) is not None),
 ('tokio, hyper dispatch, axum, tower, futures', lambda k,s: re.search(r'tokio|hyper|axum|tower|futures|mio|bytes::',s) is not None),
 ('other', lambda k,s: True),
]
res={}
for ep in ('mcp','oxp'):
    d=load(files[ep]); r={}
    for (k,s),n in d.items():
        for name,f in cats:
            if f(k,s): r[name]=r.get(name,0)+n; break
    res[ep]={name: r.get(name,0)/hz/reqs[ep]*1e6 for name,_ in cats}
print('| what | `/mcp` µs/call | OXP µs/call | difference |')
print('|---|---|---|---|')
tm=to=0
for name,_ in cats:
    a,b=res['mcp'][name],res['oxp'][name]; tm+=a; to+=b
    print(f'| {name} | {a:.2f} | {b:.2f} | {a-b:+.2f} |')
print(f'| **all (the server process)** | **{tm:.2f}** | **{to:.2f}** | **{tm-to:+.2f}** |')
