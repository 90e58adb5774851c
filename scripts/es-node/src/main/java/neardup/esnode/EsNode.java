package neardup.esnode;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import com.carrotsearch.randomizedtesting.RandomizedRunner;
import com.carrotsearch.randomizedtesting.annotations.ThreadLeakScope;
import com.carrotsearch.randomizedtesting.annotations.Timeout;
import com.carrotsearch.randomizedtesting.annotations.TimeoutSuite;

import org.elasticsearch.Build;
import org.elasticsearch.client.internal.node.NodeClient;
import org.elasticsearch.cluster.service.ClusterService;
import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.node.MockNode;
import org.elasticsearch.node.Node;
import org.elasticsearch.rest.RestChannel;
import org.elasticsearch.rest.RestController;
import org.elasticsearch.rest.RestHandler;
import org.elasticsearch.rest.RestRequest;
import org.elasticsearch.rest.RestResponse;
import org.elasticsearch.rest.RestStatus;
import org.elasticsearch.transport.netty4.Netty4Plugin;
import org.elasticsearch.xcontent.XContentBuilder;
import org.junit.Test;
import org.junit.runner.JUnitCore;
import org.junit.runner.Result;
import org.junit.runner.RunWith;

/**
 * One Elasticsearch 8.x/9.x node in this JVM, for scripts/es-up (ES_ENGINE=es8|es9).
 *
 * <p>Elastic publishes the server, the Netty4 transport and the test framework to Maven
 * Central, but not the modules a distribution ships (painless, analysis-common, rest-root,
 * x-pack). The node is therefore built like the server's own integration tests build theirs
 * ({@link MockNode}, which loads plugins from the classpath) with Netty4 for HTTP and
 * transport. Without rest-root nobody answers {@code GET /}, which clients read the version
 * from, so {@link Root} does. There is no scripting: painless queries fail with
 * "script_lang not supported [painless]".
 *
 * <p>The test framework draws its randomness from a randomized-testing context, which only a
 * JUnit run under {@link RandomizedRunner} has: {@code main} runs {@link #node} as the one
 * test of such a run, without time limits or thread-leak checks.
 *
 * <p>Usage: {@code EsNode HOME HTTP_PORT TRANSPORT_PORT CLUSTER_NAME}. Data and logs go under
 * HOME. SIGTERM closes the node cleanly.
 */
@RunWith(RandomizedRunner.class)
@ThreadLeakScope(ThreadLeakScope.Scope.NONE)
@TimeoutSuite(millis = Integer.MAX_VALUE)
public final class EsNode {
    private static String[] args;

    public static void main(String[] argv) {
        if (argv.length != 4) {
            System.err.println("usage: EsNode HOME HTTP_PORT TRANSPORT_PORT CLUSTER_NAME");
            System.exit(2);
        }
        args = argv;
        Result result = new JUnitCore().run(EsNode.class);
        result.getFailures().forEach(f -> System.err.println("es-node: " + f.getTrace()));
        System.exit(result.wasSuccessful() ? 0 : 1);
    }

    /** Starts the node and serves until the JVM is asked to stop. */
    @Test
    @Timeout(millis = Integer.MAX_VALUE)
    public void node() throws Exception {
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(home.resolve("logs"));
        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", args[3])
            .put("node.name", "es-node-" + args[1])
            .put("network.host", "127.0.0.1")
            .put("http.port", args[1])
            .put("transport.port", args[2])
            .put("http.type", "netty4")
            .put("transport.type", "netty4")
            .put("discovery.type", "single-node")
            // a shared dev disk is often mostly full: never refuse shard allocation for it
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        LogConfigurator.configureESLogging();
        LogConfigurator.configureWithoutConfig(settings);
        Node node = new MockNode(settings, List.of(Netty4Plugin.class));
        node.start();
        RestController rest = node.injector().getInstance(RestController.class);
        rest.registerHandler(new Root(node));
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            }
            stopped.countDown();
        }));
        System.out.println("es-node: started Elasticsearch " + Build.current().version()
            + " on http://127.0.0.1:" + args[1]);
        stopped.await();
    }

    /** {@code GET /}: name, cluster and version, as rest-root's handler answers it. */
    static final class Root implements RestHandler {
        private final Node node;

        Root(Node node) {
            this.node = node;
        }

        @Override
        public List<Route> routes() {
            return List.of(new Route(RestRequest.Method.GET, "/"));
        }

        @Override
        public String getName() {
            return "neardup_es_node_root";
        }

        @Override
        public void handleRequest(RestRequest request, RestChannel channel, NodeClient client)
                throws Exception {
            ClusterService cluster = node.injector().getInstance(ClusterService.class);
            Build build = Build.current();
            XContentBuilder b = channel.newBuilder();
            b.startObject();
            b.field("name", cluster.getNodeName());
            b.field("cluster_name", cluster.getClusterName().value());
            b.field("cluster_uuid", cluster.state().metadata().clusterUUID());
            b.startObject("version");
            b.field("number", build.version());
            b.field("build_flavor", "default");
            b.field("build_type", build.type().displayName());
            b.field("build_hash", build.hash());
            b.field("build_date", build.date());
            b.field("build_snapshot", build.isSnapshot());
            b.endObject();
            b.field("tagline", "You Know, for Search");
            b.endObject();
            channel.sendResponse(new RestResponse(RestStatus.OK, b));
        }
    }
}
