// How the overview page words a service's replica choice and its replicas' load readings, from
// the `routing` and `loads` fields of /status. Pure functions: no DOM, so they are tested in
// Node as they are shipped.

/** `fewest in flight`, `queue-aware`, and the affinity header when there is one. */
export function routingText(routing) {
  if (routing === undefined || routing === null) return '';
  const policy = routing.policy === 'queue-aware' ? 'queue-aware (the replicas’ own queues)' : 'fewest in flight';
  return routing.affinityHeader ? `${policy} · sessions by ${routing.affinityHeader}` : policy;
}

/**
 * One line per replica reading: `svc-1: 3 waiting · 12 running · cache 42 % · 120 ms ago` (running
 * with a preset that reads it), or why it is not
 * used (`svc-2: weighed by in flight (status 500)`). Empty without readings.
 */
export function loadsText(loads) {
  if (!Array.isArray(loads)) return '';
  return loads
    .map((l) => {
      if (!l.used) return `${l.replica}: weighed by in flight${l.problem ? ` (${l.problem})` : ''}`;
      const parts = [`${l.waiting} waiting`];
      if (typeof l.running === 'number') parts.push(`${l.running} running`);
      if (l.cacheUsage !== null) parts.push(`cache ${Math.round(l.cacheUsage * 100)} %`);
      if (l.ageMs !== null) parts.push(l.ageMs < 1000 ? `${l.ageMs} ms ago` : `${(l.ageMs / 1000).toFixed(1)} s ago`);
      return `${l.replica}: ${parts.join(' · ')}`;
    })
    .join('\n');
}
