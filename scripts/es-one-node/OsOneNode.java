package neardup.esup;

import org.codelibs.opensearch.runner.OpenSearchRunner;

/**
 * One node of an es-up cluster in a JVM of its own (scripts/es-up, os3): codelibs' runner,
 * which would start nodes 1..N in this JVM, starts only node {@code -Desup.node=I} (its http
 * port, data dir node_I and config as the runner sets them), with the ingest role beside the
 * cluster_manager and data roles the runner gives (a write to an index with a default or final
 * pipeline needs an ingest node: "There are no ingest nodes in this cluster" otherwise). The
 * roles are set through the runner's onBuild hook; its own defaults only fill what is absent.
 */
public class OsOneNode extends OpenSearchRunner {
    private final int only;

    OsOneNode(int only) {
        this.only = only;
    }

    @Override
    protected void execute(int number) {
        if (number == only) {
            super.execute(number);
        }
    }

    public static void main(String[] args) {
        OsOneNode runner = new OsOneNode(Integer.parseInt(System.getProperty("esup.node")));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                runner.close();
            } catch (Exception e) {
                System.err.println("es-one-node: close failed: " + e);
            }
        }));
        runner.onBuild((number, settings) -> settings.putList("node.roles", "cluster_manager", "data", "ingest"));
        runner.build(args);
        try {
            while (!runner.isClosed()) {
                Thread.sleep(5000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
