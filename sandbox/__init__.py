"""What the host runs for a tenant, and where it may reach: the per-session sandbox
(bubblewrap), its forwarding proxy, and the outbound address rules."""
