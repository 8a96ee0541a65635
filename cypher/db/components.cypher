// mode: read
// Server name, version and edition (kope db status, kope doctor).
CALL dbms.components() YIELD name, versions, edition
RETURN name, versions[0] AS version, edition
