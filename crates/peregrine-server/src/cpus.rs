//! Which CPUs the process may run on, which one each worker belongs to, and pinning a worker
//! thread to its CPU (`ServerConfig::pin`). Connection steering (`steering.rs`) uses the same
//! assignment, so a pinned worker receives the connections its own CPU received.

use std::io;

/// The CPUs this process may run on (its affinity mask: `taskset`, cgroup cpusets; offline CPUs
/// are never in it), ascending.
#[cfg(target_os = "linux")]
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: `cpu_set_t` is a plain bit array, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size passed is the size of `set`, which the
    // kernel writes at most that many bytes of.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let bits = 8 * std::mem::size_of_val(&set);
    // SAFETY: `cpu < bits`, inside the set `CPU_ISSET` reads.
    Ok((0..bits)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Not Linux: no affinity mask to read.
#[cfg(not(target_os = "linux"))]
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "CPU affinity is read on Linux only",
    ))
}

/// The CPU of each worker: worker i gets the i-th allowed CPU, so `taskset -c 2,3` with two
/// workers gives CPUs 2 and 3. Workers past the number of allowed CPUs get none (`None`).
pub(crate) fn worker_cpus(allowed: &[usize], workers: usize) -> Vec<Option<usize>> {
    (0..workers).map(|i| allowed.get(i).copied()).collect()
}

/// Binds the calling thread to `cpu` alone.
pub(crate) fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_current_thread_cpus(&[cpu])
}

/// Binds the calling thread to `cpus`.
#[cfg(target_os = "linux")]
fn set_current_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: `cpu_set_t` is a plain bit array, valid when zeroed.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= 8 * std::mem::size_of_val(&set) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the affinity mask's size"),
            ));
        }
        // SAFETY: `cpu` is inside the set (checked above).
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is initialised and its size is passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Not Linux: pinning is not supported.
#[cfg(not(target_os = "linux"))]
fn set_current_thread_cpus(_cpus: &[usize]) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "pinning is supported on Linux only",
    ))
}

/// The CPU each worker is pinned to when `ServerConfig::pin` is on (`None` for every worker
/// otherwise), with a log line for what cannot be pinned.
pub(crate) fn pin_plan(pin: bool, workers: usize) -> Vec<Option<usize>> {
    if !pin {
        return vec![None; workers];
    }
    let allowed = match allowed_cpus() {
        Ok(cpus) => {
            // Read before any worker is pinned: what the threads workers start get back.
            let _ = PROCESS_CPUS.set(cpus.clone());
            cpus
        }
        Err(e) => {
            tracing::warn!(error = %e, "PIN: cannot read the CPUs this process may use; workers not pinned");
            return vec![None; workers];
        }
    };
    let plan = worker_cpus(&allowed, workers);
    if workers > allowed.len() {
        tracing::warn!(
            workers,
            allowed = ?allowed,
            "PIN: more workers than CPUs this process may use; workers {}..{} are not pinned",
            allowed.len(),
            workers - 1
        );
    }
    plan
}

/// The process's CPUs as [`pin_plan`] read them, before pinning.
static PROCESS_CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// For the threads a pinned worker's runtime starts (tokio's blocking pool): a thread inherits
/// its creator's CPU, so blocking work (compression, file reads) would otherwise compete with
/// the worker on its one CPU. Gives them back the process's CPUs.
pub(crate) fn unpin_helper_thread() {
    if let Some(cpus) = PROCESS_CPUS.get() {
        if let Err(e) = set_current_thread_cpus(cpus) {
            tracing::warn!(error = %e, "PIN: a worker's helper thread stays on the worker's CPU");
        }
    }
}

/// Pins the calling worker thread (`worker`) to `cpu`, logging the outcome: a worker that
/// cannot be pinned still serves, unpinned.
pub(crate) fn pin_worker(worker: usize, cpu: usize) {
    match pin_current_thread(cpu) {
        Ok(()) => tracing::debug!(worker, cpu, "worker pinned"),
        Err(e) => {
            tracing::error!(worker, cpu, error = %e, "PIN: cannot pin the worker to its CPU; it runs unpinned")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_take_the_allowed_cpus_in_order() {
        assert_eq!(worker_cpus(&[0, 1], 2), [Some(0), Some(1)]);
        // taskset -c 2,3 (or CPU 1 offline): the list has gaps, workers follow it.
        assert_eq!(worker_cpus(&[0, 2, 3], 2), [Some(0), Some(2)]);
        assert_eq!(worker_cpus(&[2, 3], 3), [Some(2), Some(3), None]);
        assert_eq!(worker_cpus(&[], 1), [None]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_is_pinned_to_an_allowed_cpu_and_refused_an_impossible_one() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let last = *allowed.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), [last]);
            // SAFETY: no preconditions.
            let now = unsafe { libc::sched_getcpu() };
            assert_eq!(now as usize, last);
            assert!(pin_current_thread(1 << 20).is_err());
        })
        .join()
        .unwrap();
        // A CPU that does not exist (the mask's last bit; no machine here has 1024 CPUs):
        // EINVAL from the kernel, reported.
        let e = std::thread::spawn(|| pin_current_thread(1023))
            .join()
            .unwrap()
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    }
}
