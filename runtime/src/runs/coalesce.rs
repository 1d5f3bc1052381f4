//! Requests made together go to the server together: a task takes every request waiting and sends them as one batch, each caller getting its own answer.
//!
//! A stage worker's jobs each settle and hand on from their own task, and
//! the jobs of one read end at about the same time. Sent one by one, each
//! would cost the server a Function call of its own, and a call's own cost
//! (not its commands) is most of what a pipeline's transitions cost
//! (docs/benchmarks.md). Here one task takes what is waiting while the last
//! batch was out, and hands it to a sender that may merge requests into
//! fewer calls; the callers still await their own answers, so a job is
//! acked only after its own transition, exactly as when sent alone.

use std::future::Future;

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

/// One request and where its answer goes.
type Waiting<R, A> = (R, oneshot::Sender<Result<A>>);

/// Where requests go to be sent together; the task ends with the last handle.
pub(crate) struct Coalescer<R, A> {
    sender: mpsc::UnboundedSender<Waiting<R, A>>,
}

impl<R: Send + 'static, A: Send + 'static> Coalescer<R, A> {
    /// Starts the task on the current tokio runtime: it takes at most `max`
    /// waiting requests at a time and sends them with `send`, which answers
    /// each, in order, and must not hold what holds this handle (the task
    /// would never end).
    pub(crate) fn start<S, F>(max: usize, send: S) -> Self
    where
        S: Fn(Vec<R>) -> F + Send + 'static,
        F: Future<Output = Vec<Result<A>>> + Send + 'static,
    {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(receiver, max.max(1), send));
        Coalescer { sender }
    }

    /// Sends `request` in the next batch and waits for its answer.
    /// `context` names the request in an error when the task is gone.
    pub(crate) async fn send(&self, request: R, context: impl FnOnce() -> String) -> Result<A> {
        let (reply, replied) = oneshot::channel();
        if self.sender.send((request, reply)).is_err() {
            return Err(stopped(context()));
        }
        match replied.await {
            Ok(answer) => answer,
            Err(_) => Err(stopped(context())),
        }
    }
}

async fn run<R, A, S, F>(mut receiver: mpsc::UnboundedReceiver<Waiting<R, A>>, max: usize, send: S)
where
    S: Fn(Vec<R>) -> F,
    F: Future<Output = Vec<Result<A>>>,
{
    // One batch out at a time: what arrives meanwhile goes in the next. More
    // at once only split the same work into more, smaller calls, which cost
    // the server more (queuegen-bench --pipeline).
    let mut waiting = Vec::with_capacity(max);
    while receiver.recv_many(&mut waiting, max).await > 0 {
        let (requests, replies): (Vec<R>, Vec<_>) = waiting.drain(..).unzip();
        let count = requests.len();
        let mut answers = send(requests).await.into_iter();
        for reply in replies {
            let answer = answers.next().unwrap_or_else(|| {
                Err(stopped(format!(
                    "a batch of {count} requests answered fewer"
                )))
            });
            // A caller that stopped waiting (its job's timeout) needs no answer.
            let _ = reply.send(answer);
        }
    }
}

/// The batching task is gone: it can only have panicked.
fn stopped(context: String) -> Error {
    Error::redis(
        context,
        std::io::Error::other("the pipeline's batching task stopped").into(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn requests_waiting_together_are_sent_together_and_each_gets_its_own_answer() {
        let batches: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
        let seen = Arc::clone(&batches);
        let coalescer = Coalescer::start(3, move |requests: Vec<u32>| {
            seen.lock().unwrap().push(requests.clone());
            async move {
                // The batch is out for a while: later requests pile up.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                requests
                    .into_iter()
                    .map(|n| {
                        if n == 4 {
                            Err(stopped(format!("request {n} refused")))
                        } else {
                            Ok(n * 10)
                        }
                    })
                    .collect()
            }
        });
        let coalescer = Arc::new(coalescer);
        let tasks: Vec<_> = (0..7u32)
            .map(|n| {
                let coalescer = Arc::clone(&coalescer);
                tokio::spawn(async move { coalescer.send(n, || format!("request {n}")).await })
            })
            .collect();
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap().map_err(|err| err.to_string()));
        }
        for (n, answer) in answers.iter().enumerate() {
            if n == 4 {
                assert!(answer.as_ref().unwrap_err().contains("request 4 refused"));
            } else {
                assert_eq!(answer.as_ref().unwrap(), &(n as u32 * 10));
            }
        }
        let batches = batches.lock().unwrap();
        let mut sent: Vec<u32> = batches.iter().flatten().copied().collect();
        sent.sort_unstable();
        assert_eq!(sent, (0..7).collect::<Vec<_>>(), "each request sent once");
        assert!(batches.iter().all(|batch| batch.len() <= 3), "{batches:?}");
        assert!(
            batches.len() < 7,
            "requests waiting together share a batch: {batches:?}"
        );
    }

    #[tokio::test]
    async fn a_batch_answering_fewer_fails_the_rest_and_the_task_goes_on() {
        let coalescer = Coalescer::start(10, |requests: Vec<u32>| async move {
            requests.into_iter().skip(1).map(Ok).collect::<Vec<_>>()
        });
        let err = coalescer.send(1, || "one".into()).await.unwrap_err();
        assert!(err.to_string().contains("answered fewer"), "{err}");
        // Alone in its batch, the next request is the one dropped again.
        assert!(coalescer.send(2, || "two".into()).await.is_err());
    }
}
