//! Where a request goes: the page's files, compiled into the binary, or a
//! kind's answers under `/api/`, after the guard has let it through. Nothing
//! in a request names a file: the paths are a fixed list.

use hyper::body::Bytes;

use super::answers::{Answers, Key};
use super::guard::Guard;
use super::http::{Asked, Reply};
use crate::api::{self, Api, Params};

/// The page's files, by path: the pages, their style and their ES modules
/// (no build step: the browser loads the modules as written).
pub(crate) const ASSETS: [(&str, &str, &str); 20] = {
    const HTML: &str = "text/html; charset=utf-8";
    const JS: &str = "text/javascript; charset=utf-8";
    const CSS: &str = "text/css; charset=utf-8";
    // The path a file is served at, its type and its text.
    macro_rules! asset {
        ($name:literal, $kind:ident) => {
            (
                concat!("/", $name),
                $kind,
                include_str!(concat!("../../assets/", $name)),
            )
        };
    }
    [
        asset!("index.html", HTML),
        asset!("timeline.html", HTML),
        asset!("common.css", CSS),
        asset!("app.css", CSS),
        asset!("timeline.css", CSS),
        asset!("timeline.js", JS),
        asset!("timeline-input.js", JS),
        asset!("timeline-panel.js", JS),
        asset!("timeline-state.js", JS),
        asset!("canvas.js", JS),
        asset!("app.js", JS),
        asset!("api.js", JS),
        asset!("dom.js", JS),
        asset!("filter.js", JS),
        asset!("flame.js", JS),
        asset!("flamegraph.js", JS),
        asset!("graph.js", JS),
        asset!("state.js", JS),
        asset!("tables.js", JS),
        asset!("urlstate.js", JS),
    ]
};

/// Where a request goes.
pub(crate) enum Routed<A: Api> {
    /// Answered at once.
    Reply(Reply),
    /// A query, for a worker.
    Query(Key<A>),
}

/// Checks a request and says where it goes.
pub(crate) fn route<A: Api>(asked: &Asked, guard: &Guard, answers: &Answers<A>) -> Routed<A> {
    let refuse = |status, why: &str| Routed::Reply(Reply::text(status, why));
    if let Err(refused) = guard.admit(asked) {
        return Routed::Reply(refused);
    }
    if !asked.get {
        return refuse(405, "only GET");
    }
    let (path, query) = asked.url.split_once('?').unwrap_or((&asked.url, ""));
    let path = match path {
        "/" => A::PAGE,
        path => path,
    };
    if let Some(&(_, content_type, body)) = ASSETS.iter().find(|(p, _, _)| *p == path) {
        return Routed::Reply(Reply {
            status: 200,
            content_type,
            body: Bytes::from_static(body.as_bytes()),
        });
    }
    let Some(name) = path.strip_prefix("/api/") else {
        return refuse(404, "not found");
    };
    let mut params: Params = Vec::new();
    let mut token = asked
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::to_string);
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "token" => token = Some(value.into_owned()),
            _ => params.push((key.into_owned(), value.into_owned())),
        }
    }
    if let Err(refused) = guard.authorize(token.as_deref()) {
        return Routed::Reply(refused);
    }
    if name == "features" {
        // A followed trace also says how often it grew and whether it may grow
        // more: the page asks again while it may.
        let followed = match answers.api().followed() {
            Some((generation, writing)) => {
                format!(", \"followed\": {{\"generation\": {generation}, \"writing\": {writing}}}")
            }
            None => String::new(),
        };
        return Routed::Reply(Reply::json(format!(
            "{{\"kind\": \"{}\", \"compare\": {}{followed}}}",
            A::KIND,
            answers.api().compares()
        )));
    }
    let Some(endpoint) = api::endpoint::<A>(name) else {
        return refuse(404, "not found");
    };
    let key = match answers.api().query(endpoint, params) {
        Ok(query) => (endpoint, query),
        Err(e) => return refuse(A::status(&e), &e.to_string()),
    };
    match A::is_ready(endpoint) {
        true => Routed::Reply(answers.ask(&key)),
        false => Routed::Query(key),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::testing::{TOKEN, asker, get, memtrace, status};
    use super::*;
    use crate::TimelineTrace;

    #[test]
    fn requests_are_routed_or_refused() {
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let s = memtrace();
        let ask = asker(&guard, &s);
        let page = route(&get("/", "127.0.0.1:1"), &guard, &s);
        assert!(matches!(page, Routed::Reply(r) if r.content_type == "text/html; charset=utf-8"));
        assert_eq!(ask("/app.js").0, 200);
        assert_eq!(ask("/api/top?arg=--limit&arg=3").0, 200);
        assert_eq!(ask("/api/top?arg=--limit&arg=three").0, 400);
        assert_eq!(ask("/api/top?limit=three").0, 400);
        assert_eq!(ask("/api/top?nonsense=3").0, 400);
        assert!(ask("/api/top?nonsense=3").1.contains("by, "));
        assert_eq!(ask("/api/top?peak=maybe").0, 400);
        assert_eq!(ask("/api/info?limit=3").0, 400);
        assert_eq!(ask("/api/diff").0, 400);
        assert_eq!(ask("/api/info?arg=x").0, 400);
        assert_eq!(ask("/Cargo.toml").0, 404);
        assert_eq!(ask("/api/nope").0, 404);
        let mut post = get("/", "127.0.0.1:1");
        post.get = false;
        assert_eq!(status(&post, &guard, &s).0, 405);
        assert_eq!(
            ask("/api/features").1,
            "{\"kind\": \"memtrace\", \"compare\": false}"
        );
        // The info needs no worker; queries do.
        let info = get(&format!("/api/info?token={TOKEN}"), "127.0.0.1:1");
        assert!(matches!(route(&info, &guard, &s), Routed::Reply(_)));
        let top = get(&format!("/api/top?token={TOKEN}"), "127.0.0.1:1");
        assert!(matches!(route(&top, &guard, &s), Routed::Query(_)));
    }

    #[test]
    fn a_timeline_is_served_with_its_own_page_and_endpoints() {
        use tracekit_fxt::write::{VecDestination, Writer};
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let th = w
            .set_thread_slot(
                1,
                tracekit_fxt::format::Koid(1),
                tracekit_fxt::format::Koid(2),
            )
            .unwrap();
        let (cat, name) = (w.intern("c").unwrap(), w.intern("n").unwrap());
        w.duration_complete(th, cat, name, 10, 20, &[]).unwrap();
        let bytes = w.finish().unwrap().into_vec();
        let mut reader = tracekit_fxt::read::Reader::new(&bytes);
        let built = tracekit_timeline::open::build_timeline(
            &mut reader,
            true,
            &tracekit_columns::Spill::memory(),
            &mut |_| {},
        );
        let stats = crate::timeline::stats_json(&built.stats.unwrap());
        let s = Answers::new(TimelineTrace::new("t.fxt".into(), built.timeline, stats));
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let ask = asker(&guard, &s);
        let page = ask("/");
        assert_eq!(page.0, 200);
        assert!(page.1.contains("/timeline.js"), "{}", page.1);
        assert!(ask("/api/features").1.contains("\"timeline\""));
        assert!(ask("/api/tracks").1.contains("\"slices\":1"));
        assert!(ask("/api/stats").1.contains("\"duration_complete\":1"));
        assert_eq!(ask("/api/window?from=0&to=10&px=10").0, 200);
        assert_eq!(ask("/api/window?px=0").0, 400);
        assert_eq!(ask("/api/window?arg=--px").0, 400);
        assert_eq!(ask("/api/info").0, 404);
        assert_eq!(ask("/api/top?limit=1").0, 200);
        // Its queries go to the workers; its first answers do not.
        let key = |url: &str| {
            route(
                &get(&format!("{url}&token={TOKEN}"), "127.0.0.1:1"),
                &guard,
                &s,
            )
        };
        assert!(matches!(key("/api/window?px=9"), Routed::Query(_)));
        assert!(matches!(key("/api/tracks?"), Routed::Reply(_)));
    }

    /// One small trace's bytes: a slice on one thread.
    fn one_slice() -> Vec<u8> {
        use tracekit_fxt::format::Koid;
        use tracekit_fxt::write::{VecDestination, Writer};
        let mut w = Writer::new(VecDestination::new()).unwrap();
        let th = w.set_thread_slot(1, Koid(1), Koid(2)).unwrap();
        let (cat, name) = (w.intern("c").unwrap(), w.intern("n").unwrap());
        w.duration_complete(th, cat, name, 10, 20, &[]).unwrap();
        w.finish().unwrap().into_vec()
    }

    #[test]
    fn a_timeline_answers_how_far_its_build_is_until_it_is_built() {
        use crate::api::Api;
        use std::sync::mpsc;
        let (go, wait) = mpsc::channel::<()>();
        let (told, hear) = mpsc::channel::<()>();
        let build: crate::timeline::Build = Box::new(move |read| {
            read(3_000_000);
            told.send(()).unwrap();
            wait.recv().unwrap();
            let bytes = one_slice();
            let mut reader = tracekit_fxt::read::Reader::new(&bytes);
            let built = tracekit_timeline::open::build_timeline(
                &mut reader,
                true,
                &tracekit_columns::Spill::memory(),
                &mut |_| {},
            );
            let stats = crate::timeline::stats_json(&built.stats.unwrap());
            Ok((built.timeline, stats))
        });
        let s = std::sync::Arc::new(Answers::new(TimelineTrace::building(
            "t.fxt".into(),
            10_000_000,
            build,
        )));
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let ask = asker(&guard, &s);
        // Before the build runs, and while it runs: 503, saying how far it is.
        assert_eq!(
            ask("/api/tracks"),
            (503, "building the timeline: 0 of 10 MB read".into())
        );
        let preparing = {
            let s = std::sync::Arc::clone(&s);
            std::thread::spawn(move || s.api().prepare())
        };
        hear.recv().unwrap();
        for url in ["/api/tracks", "/api/window?px=9", "/api/stats"] {
            assert_eq!(
                ask(url),
                (503, "building the timeline: 3 of 10 MB read".into()),
                "{url}"
            );
        }
        // A request's parameters' names are still checked at once.
        assert_eq!(ask("/api/window?nope=1").0, 400);
        // The page is served meanwhile.
        assert_eq!(ask("/").0, 200);
        go.send(()).unwrap();
        preparing.join().unwrap();
        assert!(ask("/api/tracks").1.contains("\"slices\":1"));
        assert_eq!(ask("/api/window?from=0&to=10&px=10").0, 200);
    }

    #[test]
    fn a_timeline_whose_build_failed_says_why() {
        use crate::api::Api;
        let build: crate::timeline::Build = Box::new(|_| Err("perf script: not found".into()));
        let s = Answers::new(TimelineTrace::building("t.data".into(), 1, build));
        s.api().prepare();
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let ask = asker(&guard, &s);
        for url in ["/api/tracks", "/api/window?px=9"] {
            assert_eq!(
                ask(url),
                (
                    500,
                    "the timeline could not be built: perf script: not found".into()
                )
            );
        }
    }

    /// Options named as parameters of their own are the query their `arg` form
    /// is: the same arguments, so the same answer.
    #[test]
    fn typed_parameters_ask_what_their_arguments_ask() {
        let guard = Guard::new("127.0.0.1:1".parse().unwrap(), TOKEN.into());
        let s = memtrace();
        let key = |url: &str| match route(
            &get(&format!("{url}&token={TOKEN}"), "127.0.0.1:1"),
            &guard,
            &s,
        ) {
            Routed::Query(key) => key,
            Routed::Reply(r) => panic!("{url}: {}", String::from_utf8_lossy(&r.body)),
        };
        let argv = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        for (typed, args) in [
            (
                "/api/top?by=function&limit=3&peak",
                argv(&["--by", "function", "--limit", "3", "--peak"]),
            ),
            (
                "/api/top?between=1ms,2ms&min_size=64&peak=false",
                argv(&["--between", "1ms", "2ms", "--min-size", "64"]),
            ),
            (
                "/api/flametree?hide=a&hide=b,c&invert=true&focus=x",
                argv(&["--hide", "a", "--hide", "b,c", "--invert", "--focus", "x"]),
            ),
            (
                "/api/timeline?arg=--points&arg=9&never-collected=1",
                argv(&["--points", "9", "--never-collected"]),
            ),
        ] {
            let (_, got) = key(typed);
            assert_eq!(got, args, "{typed}");
            let plain: Vec<String> = args.iter().map(|a| format!("arg={a}")).collect();
            let path = typed.split('?').next().unwrap();
            let (_, same) = key(&format!("{path}?{}", plain.join("&")));
            assert_eq!(got, same, "{typed}");
        }
        let typed = status(
            &get(
                &format!("/api/top?by=function&limit=2&token={TOKEN}"),
                "127.0.0.1:1",
            ),
            &guard,
            &s,
        );
        let plain = status(
            &get(
                &format!("/api/top?arg=--by&arg=function&arg=--limit&arg=2&token={TOKEN}"),
                "127.0.0.1:1",
            ),
            &guard,
            &s,
        );
        assert_eq!(typed.0, 200);
        assert_eq!(typed, plain);
    }

    #[test]
    fn every_file_of_the_page_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let served = format!("/{}", path.file_name().unwrap().to_str().unwrap());
            let body = std::fs::read_to_string(&path).unwrap();
            let asset = ASSETS.iter().find(|(p, _, _)| *p == served);
            assert_eq!(asset.map(|a| a.2), Some(body.as_str()), "{served}");
        }
    }
}
