//! Work handed from one thread to another in batches, so that two cores share a pass:
//! the store is read on one thread while what it read is triaged, reconciled or written
//! on another. Only a few batches wait between them, so a pass of any length holds
//! little in memory.

use std::sync::mpsc::{Receiver, sync_channel};

/// Items handed over at a time.
pub const BATCH: usize = 64;

/// Batches that may wait for the consuming thread.
const WAITING: usize = 4;

/// Why the consuming thread gave no result.
#[derive(Debug, thiserror::Error)]
pub enum Lost {
    #[error("cannot start the {0} thread: {1}")]
    NotStarted(&'static str, std::io::Error),
    #[error("the {0} thread failed")]
    Panicked(&'static str),
}

/// Runs `produce` on this thread and `consume` on a thread of its own named `name`,
/// handing what `produce` emits to `consume` in batches of [`BATCH`], in the order
/// emitted. `emit` says false once `consume` has returned: `produce` should stop then.
pub fn beside<T: Send, P, C: Send>(
    name: &'static str,
    consume: impl FnOnce(Receiver<Vec<T>>) -> C + Send,
    produce: impl FnOnce(&mut (dyn FnMut(T) -> bool + Send)) -> P,
) -> Result<(P, C), Lost> {
    std::thread::scope(|scope| {
        let (hand_on, arriving) = sync_channel::<Vec<T>>(WAITING);
        let consuming = std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(scope, move || consume(arriving))
            .map_err(|err| Lost::NotStarted(name, err))?;
        let mut batch = Vec::with_capacity(BATCH);
        let produced = produce(&mut |item| {
            batch.push(item);
            if batch.len() < BATCH {
                return true;
            }
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            hand_on.send(full).is_ok()
        });
        if !batch.is_empty() {
            // A consumer that stopped early needs no more.
            let _ = hand_on.send(batch);
        }
        drop(hand_on);
        let consumed = consuming.join().map_err(|_| Lost::Panicked(name))?;
        Ok((produced, consumed))
    })
}

#[cfg(test)]
mod tests {
    use super::{BATCH, beside};

    /// Every item arrives once and in order, whatever the count against the batch; a
    /// consumer that stops early makes `emit` say so, and what it returned comes back.
    #[test]
    fn items_arrive_in_order_and_a_stopped_consumer_is_told() {
        for count in [0, 1, BATCH - 1, BATCH, BATCH + 1, 10 * BATCH + 3] {
            let (emitted, got) = beside(
                "test",
                |arriving| arriving.into_iter().flatten().collect::<Vec<usize>>(),
                |emit| (0..count).all(emit),
            )
            .expect("handed over");
            assert!(emitted, "{count}");
            assert_eq!(got, (0..count).collect::<Vec<_>>(), "{count}");
        }
        let (refused_at, first) = beside(
            "test",
            |arriving| arriving.recv().map(|batch| batch[0]),
            |emit| (0..100 * BATCH).find(|n| !emit(*n)),
        )
        .expect("handed over");
        assert_eq!(first, Ok(0));
        assert!(
            refused_at.is_some(),
            "emit said false once the consumer returned"
        );
    }

    #[test]
    fn a_consumer_that_panics_is_named() {
        let lost = beside(
            "writer",
            |_arriving: std::sync::mpsc::Receiver<Vec<u8>>| panic!("a bug"),
            |emit| {
                for n in 0..10 * BATCH {
                    if !emit(n as u8) {
                        break;
                    }
                }
            },
        )
        .expect_err("lost");
        assert_eq!(lost.to_string(), "the writer thread failed");
    }
}
