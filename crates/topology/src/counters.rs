//! An interface's counters as the kernel keeps them (`ip -s -j link show`): what crossed
//! it and what it dropped, read at the edges of a run (never per packet).

/// One reading of an interface's identity and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkCounters {
    pub ifindex: u32,
    /// MAC address, `aa:bb:cc:dd:ee:ff`.
    pub address: String,
    pub mtu: u32,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
    pub tx_errors: u64,
}

impl LinkCounters {
    /// Parses `ip -s -j link show dev X` (a one-element array).
    pub fn from_ip_json(json: &str) -> Result<LinkCounters, String> {
        let links: Vec<serde_json::Value> =
            serde_json::from_str(json).map_err(|e| format!("reading `ip -j` output: {e}"))?;
        let link = links.first().ok_or("`ip` listed no such interface")?;
        let num = |v: &serde_json::Value, what: &str| v.as_u64().ok_or_else(|| format!("`ip -j` output has no {what}"));
        let stats = &link["stats64"];
        let (rx, tx) = (&stats["rx"], &stats["tx"]);
        Ok(LinkCounters {
            ifindex: num(&link["ifindex"], "ifindex")? as u32,
            address: link["address"].as_str().unwrap_or_default().to_string(),
            mtu: num(&link["mtu"], "mtu")? as u32,
            rx_packets: num(&rx["packets"], "rx packets")?,
            rx_bytes: num(&rx["bytes"], "rx bytes")?,
            rx_dropped: num(&rx["dropped"], "rx dropped")?,
            rx_errors: num(&rx["errors"], "rx errors")?,
            tx_packets: num(&tx["packets"], "tx packets")?,
            tx_bytes: num(&tx["bytes"], "tx bytes")?,
            tx_dropped: num(&tx["dropped"], "tx dropped")?,
            tx_errors: num(&tx["errors"], "tx errors")?,
        })
    }

    /// The change since `earlier` (identity fields kept from `self`).
    pub fn since(&self, earlier: &LinkCounters) -> LinkCounters {
        LinkCounters {
            rx_packets: self.rx_packets.wrapping_sub(earlier.rx_packets),
            rx_bytes: self.rx_bytes.wrapping_sub(earlier.rx_bytes),
            rx_dropped: self.rx_dropped.wrapping_sub(earlier.rx_dropped),
            rx_errors: self.rx_errors.wrapping_sub(earlier.rx_errors),
            tx_packets: self.tx_packets.wrapping_sub(earlier.tx_packets),
            tx_bytes: self.tx_bytes.wrapping_sub(earlier.tx_bytes),
            tx_dropped: self.tx_dropped.wrapping_sub(earlier.tx_dropped),
            tx_errors: self.tx_errors.wrapping_sub(earlier.tx_errors),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iproute2_json() {
        let json = r#"[{"ifindex":2,"ifname":"va","mtu":1500,"address":"ce:1f:72:03:fb:0e",
            "stats64":{"rx":{"bytes":640,"packets":10,"errors":0,"dropped":1,"over_errors":0,"multicast":0},
                       "tx":{"bytes":128,"packets":2,"errors":3,"dropped":4,"carrier_errors":0,"collisions":0}}}]"#;
        let c = LinkCounters::from_ip_json(json).unwrap();
        assert_eq!((c.ifindex, c.mtu, c.address.as_str()), (2, 1500, "ce:1f:72:03:fb:0e"));
        assert_eq!((c.rx_packets, c.rx_bytes, c.rx_dropped, c.rx_errors), (10, 640, 1, 0));
        assert_eq!((c.tx_packets, c.tx_bytes, c.tx_dropped, c.tx_errors), (2, 128, 4, 3));
        let later = LinkCounters {
            rx_packets: 15,
            ..c.clone()
        };
        assert_eq!(later.since(&c).rx_packets, 5);
        assert_eq!(later.since(&c).ifindex, 2);
    }

    #[test]
    fn refuses_what_is_not_a_link() {
        assert!(LinkCounters::from_ip_json("[]").is_err());
        assert!(LinkCounters::from_ip_json("not json").is_err());
        assert!(LinkCounters::from_ip_json(r#"[{"ifindex":2}]"#).is_err());
    }
}
