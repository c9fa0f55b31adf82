//! Redraw on demand: a [`FrameRequester`] handle that anything can clone to ask for a
//! frame now or at a later instant, and the scheduler task that merges those requests.
//!
//! What must stay true: a burst of requests yields one frame; frames are at least
//! [`MIN_FRAME_GAP`] apart; nothing draws on a timer unless something asked for a frame
//! at that time (countdowns ask for the next second themselves).

use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shortest time between two frames (about 60 per second at most).
pub const MIN_FRAME_GAP: Duration = Duration::from_millis(16);

/// Asks for frames. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FrameRequester {
    tx: mpsc::UnboundedSender<Instant>,
}

impl FrameRequester {
    /// Starts the scheduler task; `draw` receives one `()` per frame to draw.
    pub fn spawn() -> (FrameRequester, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (draw_tx, draw_rx) = mpsc::channel(1);
        tokio::spawn(schedule(rx, draw_tx));
        (FrameRequester { tx }, draw_rx)
    }

    /// A frame as soon as possible.
    pub fn schedule_frame(&self) {
        let _ = self.tx.send(Instant::now());
    }

    /// A frame after `delay` (for countdowns).
    pub fn schedule_frame_in(&self, delay: Duration) {
        let _ = self.tx.send(Instant::now() + delay);
    }
}

/// Keeps the earliest requested instant and fires once when it comes.
async fn schedule(mut requests: mpsc::UnboundedReceiver<Instant>, draw: mpsc::Sender<()>) {
    let mut next: Option<Instant> = None;
    let mut last_frame = Instant::now() - MIN_FRAME_GAP;
    loop {
        let deadline = next.map(|at| at.max(last_frame + MIN_FRAME_GAP));
        tokio::select! {
            request = requests.recv() => match request {
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => return,
            },
            () = sleep_until_or_forever(deadline) => {
                next = None;
                last_frame = Instant::now();
                // A full channel already holds a frame request: this one merges into it.
                if let Err(mpsc::error::TrySendError::Closed(())) = draw.try_send(()) {
                    return;
                }
            }
        }
    }
}

async fn sleep_until_or_forever(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_requests_is_one_frame() {
        let (frames, mut draws) = FrameRequester::spawn();
        for _ in 0..100 {
            frames.schedule_frame();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(draws.try_recv(), Ok(()));
        assert!(draws.try_recv().is_err(), "one frame for the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_frame_comes_at_its_time_and_not_before() {
        let (frames, mut draws) = FrameRequester::spawn();
        frames.schedule_frame_in(Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(draws.try_recv().is_err(), "not yet");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(draws.try_recv(), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_request_wins_over_a_later_one() {
        let (frames, mut draws) = FrameRequester::spawn();
        frames.schedule_frame_in(Duration::from_secs(5));
        frames.schedule_frame();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(draws.try_recv(), Ok(()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            draws.try_recv().is_err(),
            "the later request merged into the frame"
        );
    }
}
