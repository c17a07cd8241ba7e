vcl 4.1;

# Varnish in front of one spangle node. The node sends Cache-Control
# (max-age) on values and 404s, no-store on status, health and metrics,
# and X-Spangle-DB and X-Spangle-Version on every answer of a lookup. At
# each switch of a db's version the node's purge hook sends
#   BAN / with X-Spangle-DB: <db> and X-Spangle-Version: <new version>
# and this VCL bans the db's objects of every other version: the new
# version is served at once, and nothing else is dropped.
#
# spangle.toml:
#   [purge]
#   url = "http://127.0.0.1:6081/"
#   method = "BAN"
#   headers = { X-Spangle-DB = "{db}", X-Spangle-Version = "{version}" }
#
# A hook with max_keys purges a switch that changed few keys key by key:
# with X-Spangle-Paths = "{paths_regex}" (a regular expression of the
# changed keys' paths) this VCL bans only those URLs, and every other key
# stays cached (its value, and so its ETag, did not change):
#   max_keys = 1000
#   headers = { X-Spangle-DB = "{db}", X-Spangle-Version = "{version}", X-Spangle-Paths = "{paths_regex}" }
# A switch that changed more sends X-Spangle-Paths empty: the db's other
# versions are banned, as above.
#
# The backend below is rewritten by the end-to-end test
# (cmd/spangle/cache_e2e_test.go), which runs this file as it is otherwise.

backend spangle {
    .host = "127.0.0.1";
    .port = "8080";
}

acl purgers {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    if (req.method == "BAN") {
        if (client.ip !~ purgers) {
            return (synth(405, "Not allowed"));
        }
        if (!req.http.X-Spangle-DB || !req.http.X-Spangle-Version) {
            return (synth(400, "X-Spangle-DB and X-Spangle-Version required"));
        }
        if (req.http.X-Spangle-Paths ~ ".") {
            ban("req.url ~ " + req.http.X-Spangle-Paths);
            return (synth(200, "Banned"));
        }
        ban("obj.http.X-Spangle-DB == " + req.http.X-Spangle-DB +
            " && obj.http.X-Spangle-Version != " + req.http.X-Spangle-Version);
        return (synth(200, "Banned"));
    }
    # Lookups carry no cookies or credentials worth keying on.
    unset req.http.Cookie;
}

sub vcl_backend_response {
    # Trust the node's Cache-Control (and its no-store); without one,
    # cache nothing rather than Varnish's default 120 s.
    if (!beresp.http.Cache-Control) {
        set beresp.uncacheable = true;
        set beresp.ttl = 0s;
    }
    # No grace beyond what the node allows (stale-while-revalidate).
    if (beresp.http.Cache-Control !~ "stale-while-revalidate") {
        set beresp.grace = 0s;
    }
}

sub vcl_deliver {
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
