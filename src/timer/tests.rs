use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Wake, Waker};

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count(AtomicUsize::new(0)));
    (c.clone(), Waker::from(c))
}

fn fire(w: &mut Wheel, now: u64) -> usize {
    let mut due = Vec::new();
    w.advance(now, &mut due);
    let n = due.len();
    due.into_iter().for_each(Waker::wake);
    n
}

#[test]
fn fires_at_its_tick_never_before() {
    let mut w = Wheel::new();
    let (c, waker) = counter();
    let id = w.insert(10, Some(waker.clone())).expect("armed");
    assert_eq!(fire(&mut w, 9), 0);
    assert!(!w.poll(id, &waker));
    assert_eq!(fire(&mut w, 10), 1);
    assert_eq!(c.0.load(Ordering::SeqCst), 1);
    assert!(w.poll(id, &waker));
    assert_eq!(w.armed(), 0);
    w.remove(id);
}

#[test]
fn a_tick_already_passed_is_due_at_once() {
    let mut w = Wheel::new();
    fire(&mut w, 50);
    assert_eq!(w.insert(50, None), None);
    assert_eq!(w.insert(3, None), None);
    assert!(w.insert(51, None).is_some());
}

#[test]
fn removed_entries_never_fire_and_ids_are_reused() {
    let mut w = Wheel::new();
    let (c, waker) = counter();
    // Three in one slot: removing the first moves the last into its place.
    let a = w.insert(7, Some(waker.clone())).expect("armed");
    let b = w.insert(7, Some(waker.clone())).expect("armed");
    let d = w.insert(7, Some(waker.clone())).expect("armed");
    w.remove(a);
    assert_eq!(w.armed(), 2);
    assert_eq!(fire(&mut w, 7), 2);
    assert_eq!(c.0.load(Ordering::SeqCst), 2);
    assert!(w.poll(b, &waker) && w.poll(d, &waker));
    w.remove(b);
    w.remove(d);
    let again = w.insert(9, None).expect("armed");
    assert!(again == b || again == d, "freed ids are handed out again");
}

#[test]
fn far_entries_wait_whole_turns() {
    let mut w = Wheel::new();
    let far = SLOTS as u64 * 2 + 5;
    let id = w.insert(far, None).expect("armed");
    let near = w.insert(5, None).expect("armed");
    for t in (1..far).step_by(3) {
        fire(&mut w, t);
        assert_eq!(
            w.entries[id as usize].state,
            State::Armed,
            "fired early at {t}"
        );
    }
    assert_eq!(w.entries[near as usize].state, State::Fired);
    fire(&mut w, far);
    assert_eq!(w.entries[id as usize].state, State::Fired);
}

#[test]
fn a_long_gap_fires_everything_due_and_nothing_else() {
    let mut w = Wheel::new();
    let ids: Vec<u32> = (1..=2000)
        .map(|t| w.insert(t * 3, None).expect("armed"))
        .collect();
    // One jump over many turns.
    fire(&mut w, 3000);
    for (i, id) in ids.iter().enumerate() {
        let tick = (i as u64 + 1) * 3;
        let want = if tick <= 3000 {
            State::Fired
        } else {
            State::Armed
        };
        assert_eq!(w.entries[*id as usize].state, want, "tick {tick}");
    }
    assert_eq!(w.armed(), 1000);
}

#[test]
fn reset_moves_armed_and_rearms_fired_entries() {
    let mut w = Wheel::new();
    let id = w.insert(10, None).expect("armed");
    assert!(w.reset(id, 40));
    assert_eq!(fire(&mut w, 39), 0);
    assert_eq!(w.entries[id as usize].state, State::Armed);
    fire(&mut w, 40);
    assert_eq!(w.entries[id as usize].state, State::Fired);
    // Fired, then moved later: waits again.
    assert!(w.reset(id, 60));
    assert_eq!(w.entries[id as usize].state, State::Armed);
    // Moved to the past: fired at once, nothing left armed.
    assert!(!w.reset(id, 20));
    assert_eq!(w.entries[id as usize].state, State::Fired);
    assert_eq!(w.armed(), 0);
}

/// A sleep at `tick` on this thread's wheel, polled by hand (the ticker counts as running:
/// there is no runtime here, and the test advances the wheel itself).
fn sleep_here(tick: u64) -> Sleep {
    with(|c| {
        c.wheel = Wheel::new();
        c.ticker_running = true;
    });
    sleep_until(at_tick(tick))
}

fn ready(s: &mut Sleep, waker: &Waker) -> bool {
    let mut cx = Context::from_waker(waker);
    Pin::new(s).poll(&mut cx).is_ready()
}

/// Advance this thread's wheel to `now`; how many wakers it woke.
fn advance_here(now: u64) -> usize {
    with(|c| fire(&mut c.wheel, now))
}

fn at_tick(t: u64) -> Instant {
    with(|c| c.origin) + Duration::from_millis(t)
}

fn entry_tick(id: u32) -> u64 {
    with(|c| c.wheel.entries[id as usize].tick)
}

#[test]
fn a_deadline_moved_later_leaves_its_entry_and_fires_at_the_new_one() {
    let (c, waker) = counter();
    let mut s = sleep_here(100);
    assert!(!ready(&mut s, &waker));
    let id = s.id;
    for t in [150, 200, 250] {
        s.reset(at_tick(t));
    }
    assert_eq!(
        entry_tick(id),
        100,
        "moved later: the entry stays where it sits"
    );
    assert_eq!(advance_here(99), 0);
    assert_eq!(advance_here(100), 1, "the entry fires where it sits");
    assert!(!ready(&mut s, &waker), "the deadline is later: not ready");
    assert_eq!(entry_tick(id), 250, "now it sits at the deadline");
    assert_eq!(advance_here(249), 0);
    assert_eq!(advance_here(250), 1);
    assert!(ready(&mut s, &waker));
    assert_eq!(c.0.load(Ordering::SeqCst), 2);
    drop(s);
    assert_eq!(with(|c| c.wheel.armed()), 0);
}

#[test]
fn a_deadline_moved_sooner_moves_its_entry() {
    let (_, waker) = counter();
    let mut s = sleep_here(100);
    assert!(!ready(&mut s, &waker));
    let id = s.id;
    s.reset(at_tick(300));
    s.reset(at_tick(40));
    assert_eq!(entry_tick(id), 40, "sooner than the entry: moved");
    assert_eq!(advance_here(39), 0);
    assert_eq!(advance_here(40), 1);
    assert!(
        ready(&mut s, &waker),
        "due at the sooner deadline, never later"
    );
}

#[test]
fn a_deadline_moved_after_its_entry_fired() {
    let (_, waker) = counter();
    let mut s = sleep_here(10);
    assert!(!ready(&mut s, &waker));
    assert_eq!(advance_here(10), 1);
    // Fired and not yet polled, then moved later: it waits for the new deadline.
    s.reset(at_tick(30));
    assert!(!ready(&mut s, &waker));
    assert_eq!(advance_here(29), 0);
    assert_eq!(advance_here(30), 1);
    assert!(ready(&mut s, &waker));
    // Moved to a deadline already passed: ready at once.
    s.reset(at_tick(35));
    advance_here(40);
    assert!(
        ready(&mut s, &waker),
        "a deadline passed while it sat is due"
    );
    s.reset(at_tick(20));
    assert!(ready(&mut s, &waker));
}

#[test]
fn next_tick_is_the_first_slot_with_an_entry() {
    let mut w = Wheel::new();
    assert_eq!(w.next_tick(), None);
    let a = w.insert(30, None).expect("armed");
    w.insert(12, None).expect("armed");
    assert_eq!(w.next_tick(), Some(12));
    fire(&mut w, 12);
    assert_eq!(w.next_tick(), Some(30));
    w.remove(a);
    assert_eq!(w.next_tick(), None);
    // Beyond a turn: the slot comes round first (a wasted wake), never later than due.
    w.insert(12 + SLOTS as u64 + 4, None).expect("armed");
    assert_eq!(w.next_tick(), Some(16));
}

#[test]
fn a_sooner_entry_wakes_the_sleeping_ticker() {
    let mut w = Wheel::new();
    let (c, ticker) = counter();
    w.ticker = Some(ticker.clone());
    w.ticker_at = 100;
    w.insert(150, None).expect("armed");
    assert_eq!(
        c.0.load(Ordering::SeqCst),
        0,
        "later than its sleep: left alone"
    );
    w.insert(40, None).expect("armed");
    assert_eq!(c.0.load(Ordering::SeqCst), 1);
    assert_eq!(w.ticker_at, 40);
}

#[test]
fn ticks_round_deadlines_up_and_now_down() {
    let o = Instant::now();
    assert_eq!(tick_at(o, o), 0);
    assert_eq!(tick_at(o, o + Duration::from_micros(1)), 1);
    assert_eq!(tick_at(o, o + Duration::from_millis(1500)), 1500);
    assert_eq!(tick_by(o, o + Duration::from_micros(1999)), 1);
    assert_eq!(tick_at(o + Duration::from_secs(1), o), 0);
}

fn on_both_drivers(f: fn() -> std::pin::Pin<Box<dyn Future<Output = ()>>>) {
    monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build()
        .expect("epoll runtime")
        .block_on(f());
    if monoio::utils::detect_uring() {
        monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build()
            .expect("io_uring runtime")
            .block_on(f());
    }
}

#[test]
fn sleeps_fire_in_deadline_order_and_not_early() {
    on_both_drivers(|| {
        Box::pin(async {
            install();
            let order = std::rc::Rc::new(RefCell::new(Vec::new()));
            let start = Instant::now();
            let mut tasks = Vec::new();
            for (i, ms) in [60u64, 10, 35, 0].into_iter().enumerate() {
                let order = order.clone();
                tasks.push(monoio::spawn(async move {
                    sleep_until(start + Duration::from_millis(ms)).await;
                    assert!(start.elapsed() >= Duration::from_millis(ms), "fired early");
                    order.borrow_mut().push(i);
                }));
            }
            // One that is dropped before it fires must not disturb the rest.
            drop(monoio::spawn(async move {
                let _ = timeout(
                    Duration::from_millis(5),
                    sleep_until(start + Duration::from_secs(60)),
                )
                .await;
            }));
            for t in tasks {
                t.await;
            }
            assert_eq!(*order.borrow(), vec![3, 1, 2, 0]);
        })
    });
}

#[test]
fn timeout_returns_the_work_or_elapsed() {
    on_both_drivers(|| {
        Box::pin(async {
            install();
            assert_eq!(timeout(Duration::from_secs(30), async { 7 }).await, Ok(7));
            let t0 = Instant::now();
            let r = timeout(Duration::from_millis(20), std::future::pending::<()>()).await;
            assert_eq!(r, Err(Elapsed));
            assert!(t0.elapsed() >= Duration::from_millis(20));
            // A kept sleep moved later and earlier, as the stream relay does.
            let mut s = sleep_until(Instant::now() + Duration::from_secs(30));
            let r = timeout(Duration::from_millis(5), &mut s).await;
            assert_eq!(r, Err(Elapsed));
            s.reset(Instant::now() + Duration::from_millis(10));
            timeout(Duration::from_secs(30), &mut s)
                .await
                .expect("moved sooner: fires");
        })
    });
}

#[test]
fn a_wait_without_install_starts_the_ticker() {
    std::thread::spawn(|| {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("runtime")
            .block_on(async {
                sleep_until(Instant::now() + Duration::from_millis(5)).await;
            })
    })
    .join()
    .expect("no panic");
}

#[test]
fn ids_the_wheel_never_gave_are_harmless() {
    let mut w = Wheel::new();
    let (_, waker) = counter();
    w.remove(42);
    assert!(!w.reset(42, 10));
    assert!(
        w.poll(42, &waker),
        "reads as fired: a wait ends rather than hangs"
    );
    let id = w.insert(5, None).expect("armed");
    w.remove(id);
    assert!(w.poll(id, &waker), "a freed id too");
    assert!(!w.reset(id, 50), "a freed id is not re-armed");
    assert_eq!(w.armed(), 0);
}
